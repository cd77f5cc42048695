#!/usr/bin/env bash
# Resume the 300,000-step campaign on any machine: its sweeps, in order,
#   configs/sweeps/zoo_sprites_ref300k.yaml             beta-VAE, beta-TCVAE, FactorVAE, seeds 0-2 (bf16)
#   configs/sweeps/zoo_sprites_ref300k_more.yaml        Ada-GVAE, Ada-ML-VAE, DIP-VAE-I/II, AnnealedVAE, InfoVAE, seed 0
#   configs/sweeps/zoo_sprites_ref300k_ada_seeds.yaml   Ada-GVAE, Ada-ML-VAE, seeds 1-2
# each in its own folder CAMPAIGN/<sweep name>.
#
# A 300k run takes 6-8 hours on one thread of a 2-core CPU, longer than a session, and a session may
# start on a new machine: so each session ends by saving the unfinished runs' newest checkpoints here
# (benchmarks/campaign300k/save.sh, into resume/<sweep name>/<run id>/), and this script puts them back
# into the sweep folders, which resume them bit-exactly. A run folder already on this machine at a
# later step is left alone.
#
# Two lanes, one thread each, walk the sweeps in order: each is `sweep run --workers 1` over the same
# folder, and a run the other lane holds is reported busy and passed over (the run lock), so both
# threads stay busy to the last run instead of one idling at the end of each sweep. The milestone
# watcher (benchmarks/campaign_milestones.py) watches every sweep folder beside them.
#
#   bash benchmarks/campaign300k/resume.sh [CAMPAIGN_DIR]      # default ~/campaign300k
set -euo pipefail
cd "$(dirname "$0")/../.."
CAMPAIGN="${1:-$HOME/campaign300k}"
SWEEPS=(zoo_sprites_ref300k zoo_sprites_ref300k_more zoo_sprites_ref300k_ada_seeds)
SAVED=benchmarks/campaign300k/resume
if pgrep -f "disentangle.sweep run zoo_sprites_ref300k" >/dev/null; then
    # a second pair of lanes would pass over the runs the first holds and start new ones beside them
    echo "the campaign is already running (pgrep -af 'sweep run zoo_sprites_ref300k'); stop it first with" \
         "bash benchmarks/campaign300k/save.sh" >&2
    exit 2
fi
[ -d .venv ] && source .venv/bin/activate
step_of() {  # the step of a checkpoint, or -1
    python - "$1" <<'PY' 2>/dev/null || echo -1
import sys, torch
print(int(torch.load(sys.argv[1], map_location="cpu", weights_only=True, mmap=True)["step"]))
PY
}
for sweep in "${SWEEPS[@]}"; do
    mkdir -p "$CAMPAIGN/$sweep/runs"
    for saved in "$SAVED/$sweep"/*/; do
        [ -f "$saved/checkpoint.pt" ] || continue
        id=$(basename "$saved")
        here="$CAMPAIGN/$sweep/runs/$id"
        if [ -f "$here/checkpoint.pt" ] && [ "$(step_of "$here/checkpoint.pt")" -ge "$(step_of "$saved/checkpoint.pt")" ]; then
            echo "keep $here (at or past the saved step)"
            continue
        fi
        mkdir -p "$here"
        cp "$saved"/{checkpoint.pt,config.yaml,log.jsonl,execution.jsonl} "$here/"
        rm -f "$here/checkpoint.prev.pt" "$here/.lock"
        echo "restored $here at step $(step_of "$here/checkpoint.pt")"
    done
done
folders=()
for sweep in "${SWEEPS[@]}"; do folders+=("$CAMPAIGN/$sweep"); done
OMP_NUM_THREADS=1 nohup python benchmarks/campaign_milestones.py "${folders[@]}" --out "$CAMPAIGN/milestones" \
    >> "$CAMPAIGN/milestones.log" 2>&1 &
lane() {  # every sweep in order, one run at a time on one thread; a failed or busy run does not stop it,
    # an interrupted sweep (130: save.sh's Ctrl-C) or a killed one does. A shell started in the background
    # ignores SIGINT and cannot trap it, so the sweep's exit status is what tells the lane to stop.
    local sweep rc
    for sweep in "${SWEEPS[@]}"; do
        rc=0
        python -m disentangle.sweep run "$sweep" --out "$CAMPAIGN/$sweep" --workers 1 --threads-per-run 1 || rc=$?
        [ "$rc" -ge 128 ] && return "$rc"
    done
    return 0
}
lane > "$CAMPAIGN/lane1.log" 2>&1 &
sleep 20  # lane 1 holds its first run's lock before lane 2 looks for one
lane > "$CAMPAIGN/lane2.log" 2>&1 &
wait
