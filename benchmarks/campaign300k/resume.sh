#!/usr/bin/env bash
# Resume the 300,000-step campaign (configs/sweeps/zoo_sprites_ref300k.yaml) on any machine.
#
# A 300k run takes about 5 hours on one thread of a 2-core CPU, longer than a session, and a session
# may start on a new machine: so each session ends by saving the unfinished runs' newest checkpoints
# here (benchmarks/campaign300k/save.sh), and this script puts them back into the sweep folder before
# starting the sweep, which resumes them bit-exactly. A run folder already on this machine at a later
# step is left alone. The milestone watcher (benchmarks/campaign_milestones.py) runs beside it.
#
#   bash benchmarks/campaign300k/resume.sh [SWEEP_DIR]      # default ~/campaign300k/zoo_sprites_ref300k
set -euo pipefail
cd "$(dirname "$0")/../.."
SWEEP="${1:-$HOME/campaign300k/zoo_sprites_ref300k}"
SAVED=benchmarks/campaign300k/resume
mkdir -p "$SWEEP/runs"
[ -d .venv ] && source .venv/bin/activate
step_of() {  # the step of a checkpoint, or -1
    python - "$1" <<'PY' 2>/dev/null || echo -1
import sys, torch
print(int(torch.load(sys.argv[1], map_location="cpu", weights_only=True, mmap=True)["step"]))
PY
}
for saved in "$SAVED"/*/; do
    [ -f "$saved/checkpoint.pt" ] || continue
    id=$(basename "$saved")
    here="$SWEEP/runs/$id"
    if [ -f "$here/checkpoint.pt" ] && [ "$(step_of "$here/checkpoint.pt")" -ge "$(step_of "$saved/checkpoint.pt")" ]; then
        echo "keep $here (at or past the saved step)"
        continue
    fi
    mkdir -p "$here"
    cp "$saved"/{checkpoint.pt,config.yaml,log.jsonl,execution.jsonl} "$here/"
    rm -f "$here/checkpoint.prev.pt" "$here/.lock"
    echo "restored $here at step $(step_of "$here/checkpoint.pt")"
done
OMP_NUM_THREADS=1 nohup python benchmarks/campaign_milestones.py "$SWEEP" --out "$(dirname "$SWEEP")/milestones" \
    >> "$(dirname "$SWEEP")/milestones.log" 2>&1 &
exec python -m disentangle.sweep run zoo_sprites_ref300k --out "$SWEEP" --workers 2 --threads-per-run 1
