#!/usr/bin/env bash
# Everything a lent GPU session does, in one call of the device tool (at most 10 minutes):
#
#   1. the training-throughput benchmark alone on the GPU (python -m disentangle.training.bench
#      --device cuda), before anything else shares the GPU;
#   2. the 300k campaign's runs (benchmarks/campaign300k/gpu.sh BUDGET), in the background;
#   3. beside them: benchmarks/gpu_host_sync.py (the syncs each shipped sprites recipe makes on a real
#      GPU; its steps/s are measured while the campaign shares the GPU) and the test suite with its
#      trainer runs on the GPU (DISENTANGLE_TEST_DEVICE=cuda, tests/conftest.py; the torch and Python
#      the machine has), both on CPU cores the campaign leaves free.
#
#   here:    bash benchmarks/campaign300k/device_tree.sh slim
#   device:  run(command="bash benchmarks/gpu_session.sh 540", timeout_s=595, carry=[".campaign_gpu", ".device_zoo"])
#   here:    bash benchmarks/campaign300k/device_tree.sh restore
#            bash benchmarks/campaign300k/gpu_results.sh FILES_AT
#
# $OUT gets gpu.sh's files (gpu.log, trajectories.csv, one tar per run: at most 6 runs) and
# session.log (the benchmark, the host syncs) and pytest.log. Knobs (environment): gpu.sh's, and
# SESSION_BENCH ("--steps 300 --pool 16384 --modes eager,bf16,tf32"; "skip" to skip),
# SESSION_PYTEST (pytest arguments, "-n 6 -v ... tests"; "skip" to skip), SESSION_TEST_DEVICE (cuda),
# SESSION_SYNC (gpu_host_sync.py
# arguments; "skip" to skip).
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET="${1:-540}"
START=$(date +%s)
OUT="${OUT:?the device tool sets OUT}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
log="$OUT/session.log"
echo "== $(date -u +%FT%TZ) $(nproc) CPU cores; $("$PY" -V)" | tee -a "$log"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$log"

bench="${SESSION_BENCH:---steps 300 --pool 16384 --modes eager,bf16,tf32}"
if [ "$bench" != skip ]; then
    echo "== training-throughput benchmark, alone on the device" | tee -a "$log"
    timeout 90 "$PY" -m disentangle.training.bench --device "${SESSION_DEVICE:-cuda}" $bench 2>&1 | tee -a "$log"
fi

# the campaign gets what is left of the budget, counted from this script's start
bash benchmarks/campaign300k/gpu.sh "$(( BUDGET - ($(date +%s) - START) ))" > /dev/null 2>&1 &
campaign=$!

pytest_args="${SESSION_PYTEST:--n 6 -v -p no:cacheprovider --ignore=tests/zoo/test_shipped.py tests}"
if [ "$pytest_args" != skip ]; then
    # the zoo models the tests load by name (device_tree.sh slim leaves the zoo's weights behind)
    [ -d .device_zoo/weights ] && cp -n .device_zoo/weights/*.safetensors disentangle/zoo/weights/ 2>/dev/null
    # the trainer tests on the GPU (tests/conftest.py); -v names each result as it comes, so a run
    # stopped at its time still names its failures. Ends 120 s before the budget, so the campaign's
    # publishing has the CPU.
    DISENTANGLE_TEST_DEVICE="${SESSION_TEST_DEVICE:-cuda}" timeout "$(( BUDGET - ($(date +%s) - START) - 120 ))" \
        "$PY" -m pytest $pytest_args -o addopts="-m 'not slow' -ra" > "$OUT/pytest.log" 2>&1 &
    tests=$!
fi
sync_args="${SESSION_SYNC:---steps 20 --loop-steps 300}"
if [ "$sync_args" != skip ]; then
    echo "== host syncs on the device (steps/s shared with the campaign's runs)" | tee -a "$log"
    timeout "$(( BUDGET - ($(date +%s) - START) - 150 ))" "$PY" benchmarks/gpu_host_sync.py $sync_args 2>&1 \
        | grep -v "Warning\|warnings.warn" | tee -a "$log"
fi
if [ -n "${tests:-}" ]; then
    wait "$tests"
    echo "== pytest exited $? (124: stopped at its time): $(grep -c " PASSED " "$OUT/pytest.log") passed" | tee -a "$log"
    grep -E " (FAILED|ERROR) tests" "$OUT/pytest.log" | sed -E 's/^\[gw[0-9]+\] \[ *[0-9]+%\] //' | sort -u | tee -a "$log"
fi
wait "$campaign"
echo "== campaign exited $?; done at $(( $(date +%s) - START )) s" | tee -a "$log"
grep -A12 "== each run" "$OUT/gpu.log" | tee -a "$log"
