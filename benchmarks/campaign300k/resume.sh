#!/usr/bin/env bash
# Resume the 300,000-step campaign on any machine: its sweeps, in order,
#   configs/sweeps/zoo_sprites_ref300k.yaml             beta-VAE, beta-TCVAE, FactorVAE, seeds 0-2 (bf16)
#   configs/sweeps/zoo_sprites_ref300k_factor_fp32.yaml FactorVAE seeds 2, 1, 0 in fp32 (for CPUs without
#                                                       native bf16; one of each twin is trained)
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
# Two lanes, one thread each, walk the runs in order: each is `sweep run --workers 1` of one run's sweep
# file (lane_files.py: the campaign's sweep narrowed to one run, same id and folder; the runs the zoo
# already holds left out, as their folders stay on the machine that trained them), and a run the
# other lane holds is reported busy and passed over (the run lock), so both threads stay busy to the
# last run. The milestone
# watcher (benchmarks/campaign_milestones.py) watches every sweep folder beside them.
#
#   bash benchmarks/campaign300k/resume.sh [CAMPAIGN_DIR]      # default ~/campaign300k
set -euo pipefail
cd "$(dirname "$0")/../.."
CAMPAIGN="${1:-$HOME/campaign300k}"
SAVED=benchmarks/campaign300k/resume
RUNNING="disentangle.sweep run .*zoo_sprites_ref300k"  # the lanes' sweeps (save.sh stops them by it)
if pgrep -f "$RUNNING" >/dev/null; then
    # a second pair of lanes would pass over the runs the first holds and start new ones beside them
    echo "the campaign is already running (pgrep -af '$RUNNING'); stop it first with" \
         "bash benchmarks/campaign300k/save.sh" >&2
    exit 2
fi
[ -d .venv ] && source .venv/bin/activate
# the campaign's sweeps in order (benchmarks/campaign300k/naming.py)
mapfile -t SWEEPS < <(python -c "import sys; sys.path.insert(0, 'benchmarks/campaign300k'); from naming import SWEEPS; print(*SWEEPS, sep='\n')")
[ "${#SWEEPS[@]}" -ge 1 ] || { echo "resume.sh: could not read the campaign's sweeps from benchmarks/campaign300k/naming.py" >&2; exit 1; }
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
        cp "$saved"/{checkpoint.pt,config.yaml,log.jsonl} "$here/"
        [ -f "$saved/execution.jsonl" ] && cp "$saved/execution.jsonl" "$here/"  # recorded since 2026-11
        rm -f "$here/checkpoint.prev.pt" "$here/.lock"
        echo "restored $here at step $(step_of "$here/checkpoint.pt")"
    done
done
folders=()
for sweep in "${SWEEPS[@]}"; do folders+=("$CAMPAIGN/$sweep"); done
OMP_NUM_THREADS=1 nohup python benchmarks/campaign_milestones.py "${folders[@]}" --out "$CAMPAIGN/milestones" \
    >> "$CAMPAIGN/milestones.log" 2>&1 &
# the runs still to train, one sweep file each, in order: a run the zoo holds is not trained again
# (its folder stays on the machine that trained it; lane_files.py). On a CPU without native bf16 the
# bf16 runs are left for a machine with it (emulated bf16 measured 7x slower than fp32 there), unless
# CAMPAIGN_PRECISIONS says otherwise; CAMPAIGN_RUNS="dip_vae_ii:0 info_vae:0" keeps the runs it names.
# CAMPAIGN_CONTINUE_IN=fp32 continues the partial runs left out that way in fp32 (sweep run
# --resume-precision: each keeps its config and id, its execution.jsonl records the fp32 sessions).
# CAMPAIGN_TWINS_IN=bf16 (the default on a CPU with native bf16; "none" turns it off) continues a
# begun fp32 twin in bf16 there (lane_files.py --twins-in).
native_bf16=$(python -c "from disentangle._core.hardware import native_cpu_bf16 as n; print(1 if n() else 0)")
if [ -z "${CAMPAIGN_PRECISIONS:-}" ]; then
    if [ "$native_bf16" = 1 ]; then CAMPAIGN_PRECISIONS=bf16,fp32; else CAMPAIGN_PRECISIONS=fp32; fi
fi
if [ -z "${CAMPAIGN_TWINS_IN:-}" ] && [ "$native_bf16" = 1 ]; then CAMPAIGN_TWINS_IN=bf16; fi
# CAMPAIGN_TWINS_LAST=1 (the default on a CPU without native bf16; 0 turns it off) trains the fp32
# FactorVAE twins after every other run: five to eight times slower there than their bf16 twins on a
# CPU with native bf16, while the other fp32 runs lose about two times there (lane_files.py --twins-last).
if [ -z "${CAMPAIGN_TWINS_LAST:-}" ]; then
    if [ "$native_bf16" = 1 ]; then CAMPAIGN_TWINS_LAST=0; else CAMPAIGN_TWINS_LAST=1; fi
fi
# CAMPAIGN_THREADS=2 gives each run two threads (default 1): for one run left alone on a 2-core machine
# (run it with CAMPAIGN_RUNS naming that run; the second lane then finds it busy and ends). The thread
# count is not part of a run's id; execution.jsonl records each session's.
THREADS="${CAMPAIGN_THREADS:-1}"
lane_args=(--precisions "$CAMPAIGN_PRECISIONS" --campaign "$CAMPAIGN")  # each sweep's partial runs first
[ -n "${CAMPAIGN_RUNS:-}" ] && lane_args+=(--runs "$CAMPAIGN_RUNS")
[ -n "${CAMPAIGN_CONTINUE_IN:-}" ] && lane_args+=(--continue-in "$CAMPAIGN_CONTINUE_IN")
[ -n "${CAMPAIGN_TWINS_IN:-}" ] && [ "$CAMPAIGN_TWINS_IN" != none ] && lane_args+=(--twins-in "$CAMPAIGN_TWINS_IN")
[ "$CAMPAIGN_TWINS_LAST" = 1 ] && lane_args+=(--twins-last)
echo "precisions trained on this machine: $CAMPAIGN_PRECISIONS${CAMPAIGN_RUNS:+; runs: $CAMPAIGN_RUNS}${CAMPAIGN_CONTINUE_IN:+; partial runs of other precisions continued in $CAMPAIGN_CONTINUE_IN}${CAMPAIGN_TWINS_IN:+; begun twins continued in $CAMPAIGN_TWINS_IN}$([ "$CAMPAIGN_TWINS_LAST" = 1 ] && echo '; the fp32 twins after the rest')"
python benchmarks/campaign300k/lane_files.py "$CAMPAIGN/lanes" "${lane_args[@]}" > "$CAMPAIGN/lanes.txt"
lane() {  # every run in order, one at a time on one thread; a failed or busy run does not stop it,
    # an interrupted sweep (130: save.sh's Ctrl-C) or a killed one does. A shell started in the background
    # ignores SIGINT and cannot trap it, so the sweep's exit status is what tells the lane to stop.
    local file sweep resume_in rc
    while IFS=$'\t' read -r file sweep resume_in; do
        rc=0
        python -m disentangle.sweep run "$file" --out "$CAMPAIGN/$sweep" --workers 1 --threads-per-run "$THREADS" \
            ${resume_in:+--resume-precision "$resume_in"} || rc=$?
        [ "$rc" -ge 128 ] && return "$rc"
    done < "$CAMPAIGN/lanes.txt"
    return 0
}
# Linux schedules by autogroup (one per session, and setsid starts one): a niced test run in another
# terminal is a group of its own and takes a full CPU's share from the lanes' group, nice or not (the
# lanes fell from 10.5 to 3-4 steps/s each beside niced test runs, 2026-12-07). The lanes' group gets
# a higher weight where the kernel lets this user set it (root; CAMPAIGN_AUTOGROUP_NICE, default -5,
# "" leaves it alone): then a niced job beside them takes what the lanes leave.
if [ -n "${CAMPAIGN_AUTOGROUP_NICE--5}" ] && [ -w /proc/self/autogroup ]; then
    echo "${CAMPAIGN_AUTOGROUP_NICE--5}" > /proc/self/autogroup 2>/dev/null \
        && echo "the lanes' scheduling group: $(cat /proc/self/autogroup)" \
        || echo "the lanes' scheduling group keeps its weight (setting it was refused)"
fi
lane > "$CAMPAIGN/lane1.log" 2>&1 &
sleep 20  # lane 1 holds its first run's lock before lane 2 looks for one
lane > "$CAMPAIGN/lane2.log" 2>&1 &
wait
