#!/usr/bin/env bash
# A short second device call after gpu_session.sh (about 4 minutes): the test suite with test names
# (-v, so a run stopped at its time still names its failures), a profile of eager β-VAE steps, the
# host syncs of two recipes after the renderer's fix, and the trainer's steps/s for train.compile
# false against reduce-overhead (1,500 steps each, alone on the GPU, the renderer feeding it).
#   run(command="bash benchmarks/gpu_followup.sh", timeout_s=280)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
log="$OUT/followup.log"
(timeout "${FOLLOWUP_PYTEST_S:-200}" python3 -m pytest -n 8 -v -p no:cacheprovider -o addopts="-m 'not slow'" tests \
    > "$OUT/pytest.log" 2>&1; echo "pytest exited $?" >> "$OUT/pytest.log") &
tests=$!
python3 benchmarks/gpu_host_sync.py --configs sprites/beta_vae weak/ada_gvae_sprites --steps 20 --loop-steps 0 2>&1 \
    | grep -v "Warning\|warn(" | tee -a "$log"
python3 benchmarks/gpu_host_sync.py --profile sprites/beta_vae 2>&1 | grep -v "Warning\|warn(" | tee -a "$log"
for c in false reduce-overhead; do
    timeout 80 python3 -m disentangle.train --config configs/sprites/beta_vae.yaml train.steps=1500 train.device=cuda \
        train.compile=$c train.log_every=250 train.checkpoint_every=100000 train.out_dir=/tmp/compile_$c \
        train.progress=false train.traversals=false > /tmp/compile_$c.out 2>&1
    echo "compile=$c exit $?: steps/s $(python3 -c "import json,sys; print([round(json.loads(l).get('steps_per_s', 0)) for l in open(sys.argv[1])])" /tmp/compile_$c/log.jsonl 2>&1 | tail -1)" | tee -a "$log"
    grep -m3 -i "error\|execution:" /tmp/compile_$c.out | tee -a "$log"
done
wait "$tests"
grep -E "(FAILED|ERROR) tests|^E  |pytest exited" "$OUT/pytest.log" | sort | uniq | head -80 | tee -a "$log"
grep -cE "PASSED" "$OUT/pytest.log" | sed 's/^/passed: /' | tee -a "$log"
