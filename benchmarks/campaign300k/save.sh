#!/usr/bin/env bash
# End a session of the 300,000-step campaign: stop the lanes of resume.sh, the sweeps (Ctrl-C: each run
# checkpoints the step it reached) and the milestone watcher, then copy every unfinished run's
# checkpoint, config and logs to benchmarks/campaign300k/resume/<sweep name>/<run id>/ for
# benchmarks/campaign300k/resume.sh to put back on the next machine. A run the zoo holds is not
# copied, and its saved copy is deleted; a finished run the zoo does not hold yet is copied (the next
# machine's sweep scores it, and publish.py publishes it).
#
#   bash benchmarks/campaign300k/save.sh [CAMPAIGN_DIR]      # default ~/campaign300k
set -euo pipefail
cd "$(dirname "$0")/../.."
CAMPAIGN="${1:-$HOME/campaign300k}"
SAVED=benchmarks/campaign300k/resume
[ -d .venv ] && source .venv/bin/activate
# the lanes first, so that none starts the next sweep when its sweep stops
pkill -f "benchmarks/campaign300k/resume.sh" || true
# SIGINT to each sweep's process group, as a terminal's Ctrl-C: every worker checkpoints the step it
# reached (a sweep from before 2026-11-27 did not pass a signal sent to its own process on to them).
# Once per group: the two lanes share resume.sh's group, and a second SIGINT stops a trainer at once,
# keeping only its last periodic checkpoint (it cost 1,700 steps a run on 2026-11-27)
for pgid in $(for pid in $(pgrep -f "disentangle.sweep run .*zoo_sprites_ref300k"); do
                  ps -o pgid= -p "$pid"; done | tr -d ' ' | sort -u); do
    kill -INT -- "-$pgid" 2>/dev/null || true
done
for _ in $(seq 60); do  # the workers checkpoint and exit; the pool's parent may linger
    pgrep -f "disentangle.sweep run .*zoo_sprites_ref300k" >/dev/null || break
    sleep 2
done
pkill -f "disentangle.sweep run .*zoo_sprites_ref300k" || true
pkill -f "campaign_milestones.py" || true
# Would committing these checkpoints push this session's submission past its size limits
# (submission_size.py)? A replaced checkpoint counts twice in a diff, its old and its new version
# (about 2.3 times its size in all): a FactorVAE pair (~68 MB each) is over the limit by itself, and the
# session that saved one was refused whole (December 2026). Measured after the stop, as a run checkpoints
# its step when it stops; a checkpoint equal to its saved copy adds nothing. The runs stay checkpointed
# here either way (resume.sh goes on from them). SAVE_FORCE=1 saves anyway.
in_zoo() {  # whether the zoo holds the run of this folder (under its CPU or GPU name)
    python - "$1" <<'PY'
import json, sys
sys.path.insert(0, "benchmarks/campaign300k")
import yaml
from naming import zoo_name
config = yaml.safe_load(open(sys.argv[1] + "/config.yaml"))
shipped = json.load(open("disentangle/zoo/manifest.json"))["models"]
sys.exit(0 if any(zoo_name(config, hardware) in shipped for hardware in ("cpu", "gpu")) else 1)
PY
}
# a finished run the zoo does not hold yet is saved as an unfinished one (the next machine's sweep
# finds it at its last step and scores it): deleting its saved copy would lose it with this machine
replacing=()
for run in "$CAMPAIGN"/zoo_sprites_ref300k*/runs/*/; do
    [ -f "$run/checkpoint.pt" ] || continue
    saved="$SAVED/$(basename "$(dirname "$(dirname "$run")")")/$(basename "$run")/checkpoint.pt"
    if [ -f "$run/metrics.json" ] && in_zoo "$run"; then
        continue  # published: its saved copy is deleted at the end, where the budget allows
    fi
    cmp -s "$run/checkpoint.pt" "$saved" && continue
    replacing+=(--replacing "$saved" "$run/checkpoint.pt")
done
if ! python benchmarks/campaign300k/submission_size.py "${replacing[@]}" && [ "${SAVE_FORCE:-0}" != 1 ]; then
    echo "save.sh: the lanes are stopped and every run is checkpointed in $CAMPAIGN, but nothing was" \
         "copied to $SAVED. Save fewer runs (move a run folder aside), or" \
         "SAVE_FORCE=1 bash benchmarks/campaign300k/save.sh if the budget is known to hold." >&2
    exit 1
fi
for sweep_dir in "$CAMPAIGN"/zoo_sprites_ref300k*/; do
    sweep=$(basename "$sweep_dir")
    for run in "$sweep_dir"runs/*/; do
        id=$(basename "$run")
        [ -f "$run/checkpoint.pt" ] || continue
        if [ -f "$run/metrics.json" ] && in_zoo "$run"; then
            continue  # published: nothing to resume (its saved copy: below)
        fi
        mkdir -p "$SAVED/$sweep/$id"
        for f in checkpoint.pt config.yaml log.jsonl execution.jsonl; do
            [ -f "$run/$f" ] || continue  # execution.jsonl: recorded since 2026-11 only
            if ! { cp "$run/$f" "$SAVED/$sweep/$id/$f.tmp" && mv "$SAVED/$sweep/$id/$f.tmp" "$SAVED/$sweep/$id/$f"; }; then
                rm -f "$SAVED/$sweep/$id/$f.tmp"
                echo "save.sh: could not save $run$f (a full disk?); the saved copy of $sweep/$id is the" \
                     "earlier one. The run stays checkpointed in $CAMPAIGN." >&2
                exit 1
            fi
        done
        if [ -f "$run/metrics.json" ]; then
            echo "saved $sweep/$id: finished, not in the zoo yet (python benchmarks/campaign300k/publish.py)"
        else
            echo "saved $sweep/$id"
        fi
    done
done
# The saved copies of runs the zoo holds now: nothing is left to resume, but a deletion counts in the
# diff as the file does (about 80 MB for a FactorVAE checkpoint), so after a FactorVAE save (about
# 160 MB) it would pass the budget. Such a copy is kept for a later session to delete: resume.sh
# restores it there and the lanes pass over the run the zoo holds.
for saved in "$SAVED"/*/*/; do
    [ -f "$saved/checkpoint.pt" ] && [ -f "$saved/config.yaml" ] || continue
    in_zoo "$saved" || continue
    if python benchmarks/campaign300k/submission_size.py --replacing "$saved/checkpoint.pt" /dev/null > /dev/null; then
        rm -rf "${saved:?}"
        echo "deleted the saved copy of $(basename "$saved"): the zoo holds it"
    else
        echo "kept the saved copy of $(basename "$saved") (the zoo holds it): deleting it would pass this" \
             "session's budget; the next session's save.sh deletes it"
    fi
done
