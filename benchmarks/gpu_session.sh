#!/usr/bin/env bash
# Everything a lent GPU session does, in one call of the device tool (at most 10 minutes):
#
#   1. the training-throughput benchmark alone on the GPU (python -m disentangle.training.bench
#      --device cuda), before anything else shares the GPU: eager, compiled (inductor), graphs
#      (reduce-overhead: CUDA graphs), bf16 and TF32 steps/s of a conv64 β-VAE;
#   2. the test suite with its trainer runs on the GPU (DISENTANGLE_TEST_DEVICE=cuda,
#      tests/conftest.py; the torch and Python the machine has), -v so that each failure is named;
#   3. beside it, benchmarks/gpu_host_sync.py (the syncs each shipped sprites recipe makes on a GPU);
#   4. only with SESSION_CAMPAIGN=1: the 300k campaign's runs (benchmarks/campaign300k/gpu.sh) in
#      the background. Off by default: at the first lease's rates (benchmarks/RESULTS-gpu.md) no
#      300k run finishes in one call, and an unfinished GPU run is not bit-exact on a CPU.
#
#   here:    bash benchmarks/campaign300k/device_tree.sh slim
#   device:  run(command="bash benchmarks/gpu_session.sh 540", timeout_s=595, carry=[".campaign_gpu", ".device_zoo"])
#   here:    bash benchmarks/campaign300k/device_tree.sh restore
#            bash benchmarks/campaign300k/gpu_results.sh FILES_AT     # with SESSION_CAMPAIGN=1
#
# $OUT gets session.log (the benchmark, the host syncs, the tests' failures by name), pytest.log,
# and with the campaign gpu.sh's files (gpu.log, trajectories.csv, a tar per run: at most 5 runs).
# Knobs (environment): SESSION_BENCH ("--steps 300 --pool 16384 --modes
# eager,compiled,graphs,bf16,tf32"; "skip"), SESSION_PYTEST (pytest arguments, "-n 8 -v ... tests";
# "skip"), SESSION_TEST_DEVICE (cuda), SESSION_SYNC (gpu_host_sync.py arguments; "skip"),
# SESSION_CAMPAIGN (1 to train campaign runs; then gpu.sh's knobs too).
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

bench="${SESSION_BENCH:---steps 300 --pool 16384 --modes eager,compiled,graphs,bf16,tf32}"
if [ "$bench" != skip ]; then
    echo "== training-throughput benchmark, alone on the device" | tee -a "$log"
    timeout 200 "$PY" -m disentangle.training.bench --device "${SESSION_DEVICE:-cuda}" $bench 2>&1 \
        | grep -v "Warning\|warn(" | tee -a "$log"
fi

if [ "${SESSION_CAMPAIGN:-0}" = 1 ]; then
    # the campaign gets what is left of the budget, counted from this script's start
    bash benchmarks/campaign300k/gpu.sh "$(( BUDGET - ($(date +%s) - START) ))" > /dev/null 2>&1 &
    campaign=$!
fi

pytest_args="${SESSION_PYTEST:--n 8 -v -p no:cacheprovider --ignore=tests/zoo/test_shipped.py tests}"
if [ "$pytest_args" != skip ]; then
    # the zoo models the tests load by name (device_tree.sh slim leaves the zoo's weights behind)
    [ -d .device_zoo/weights ] && cp -n .device_zoo/weights/*.safetensors disentangle/zoo/weights/ 2>/dev/null
    # the trainer tests on the GPU (tests/conftest.py); -v names each result as it comes, so a run
    # stopped at its time still names its failures. Ends before the budget: 120 s before it beside
    # the campaign, so that its publishing has the CPU.
    reserve=$([ -n "${campaign:-}" ] && echo 120 || echo 20)
    DISENTANGLE_TEST_DEVICE="${SESSION_TEST_DEVICE:-cuda}" timeout "$(( BUDGET - ($(date +%s) - START) - reserve ))" \
        "$PY" -m pytest $pytest_args -o addopts="-m 'not slow' -ra" > "$OUT/pytest.log" 2>&1 &
    tests=$!
fi
sync_args="${SESSION_SYNC:---steps 20 --loop-steps 300}"
if [ "$sync_args" != skip ]; then
    echo "== host syncs on the device (steps/s shared with the tests$([ -n "${campaign:-}" ] && echo " and the campaign's runs"))" | tee -a "$log"
    timeout "$(( BUDGET - ($(date +%s) - START) - 150 ))" "$PY" benchmarks/gpu_host_sync.py $sync_args 2>&1 \
        | grep -v "Warning\|warnings.warn" | tee -a "$log"
fi
if [ -n "${tests:-}" ]; then
    wait "$tests"
    echo "== pytest exited $? (124: stopped at its time): $(grep -c " PASSED " "$OUT/pytest.log") passed" | tee -a "$log"
    grep -E " (FAILED|ERROR) tests" "$OUT/pytest.log" | sed -E 's/^\[gw[0-9]+\] \[ *[0-9]+%\] //' | sort -u | tee -a "$log"
fi
if [ -n "${campaign:-}" ]; then
    wait "$campaign"
    echo "== campaign exited $?" | tee -a "$log"
    grep -A12 "== each run" "$OUT/gpu.log" | tee -a "$log"
fi
echo "== done at $(( $(date +%s) - START )) s" | tee -a "$log"
