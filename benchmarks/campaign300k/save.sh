#!/usr/bin/env bash
# End a session of the 300,000-step campaign: stop the sweep (Ctrl-C: each run checkpoints the step it
# reached) and the milestone watcher, then copy every unfinished run's checkpoint, config and logs to
# benchmarks/campaign300k/resume/<run id>/ for benchmarks/campaign300k/resume.sh to put back on the next
# machine. Finished runs are not copied: they are published to the zoo.
#
#   bash benchmarks/campaign300k/save.sh [SWEEP_DIR]      # default ~/campaign300k/zoo_sprites_ref300k
set -euo pipefail
cd "$(dirname "$0")/../.."
SWEEP="${1:-$HOME/campaign300k/zoo_sprites_ref300k}"
SAVED=benchmarks/campaign300k/resume
# SIGINT to the sweep's process group, as a terminal's Ctrl-C: every worker checkpoints the step it
# reached (a sweep from before 2026-11-27 did not pass a signal sent to its own process on to them)
for pid in $(pgrep -f "disentangle.sweep run zoo_sprites_ref300k"); do
    pgid=$(ps -o pgid= -p "$pid" | tr -d ' ') && kill -INT -- "-$pgid" 2>/dev/null || true
done
for _ in $(seq 60); do  # the workers checkpoint and exit; the pool's parent may linger
    pgrep -f "disentangle.sweep run zoo_sprites_ref300k" >/dev/null || break
    sleep 2
done
pkill -f "disentangle.sweep run zoo_sprites_ref300k" || true
pkill -f "campaign_milestones.py" || true
for run in "$SWEEP"/runs/*/; do
    id=$(basename "$run")
    [ -f "$run/checkpoint.pt" ] || continue
    if [ -f "$run/metrics.json" ]; then
        rm -rf "${SAVED:?}/$id"  # finished: nothing to resume
        continue
    fi
    mkdir -p "$SAVED/$id"
    for f in checkpoint.pt config.yaml log.jsonl execution.jsonl; do
        cp "$run/$f" "$SAVED/$id/$f.tmp" && mv "$SAVED/$id/$f.tmp" "$SAVED/$id/$f"
    done
    echo "saved $id"
done
