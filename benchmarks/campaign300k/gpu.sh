#!/usr/bin/env bash
# The 300,000-step campaign on a lent GPU, in one call of the device tool (at most 10 minutes).
#
# Trains campaign runs side by side on the one GPU until BUDGET seconds after the start, then sends
# the sweeps SIGTERM: every run checkpoints the step it reached. By default the four runs that the
# CPU lanes take last (resume.sh) and whose checkpoints can come back: Ada-GVAE and Ada-ML-VAE seeds 1
# and 2 of configs/sweeps/zoo_sprites_ref300k_ada_seeds.yaml (same configs, same run ids; any run of
# the campaign's three sweeps can be named, gpu_sweeps.py). A FactorVAE checkpoint holds
# its discriminator and both optimizers (about 68 MB), over the device tool's 16 MiB a file and 64 MiB
# a call, so an unfinished FactorVAE run cannot come back: name factor_vae in CAMPAIGN_RUNS only where
# a run can finish within one call. Runs carried in .campaign_gpu/<run id>.tar resume.
#
# Each run is a sweep of its own. They alternate train.compile=false and reduce-overhead (CUDA
# graphs; CAMPAIGN_COMPILE), which changes neither the run id nor what a resume needs, so the logs'
# steps_per_s compare the two with no probe. Each run keeps the checkpoint of every 10,000th step
# (the keep_checkpoints callback), scored on the GPU at the end (benchmarks/trajectories_300k.py:
# the position code on each, the FactorVAE score at 20k, 100k, 200k and 300k) with the time left. nvidia-smi is sampled every 30 s. Results in $OUT (at most 8 files):
#   <run id>.tar      unfinished: checkpoint.pt, config.yaml, log.jsonl, execution.jsonl
#                     finished: the zoo weights (<name>.safetensors, published here with the device's
#                     machine record) and manifest_entry.json instead of the checkpoint, + metrics.json
#   trajectories.csv  the GPU runs' rows of benchmarks/campaign300k/trajectories.csv
#   gpu.log           this script's output: versions, the sweeps, each run's steps/s, nvidia-smi
#
# The procedure (benchmarks/campaign300k/README.md):
#   here:    bash benchmarks/campaign300k/device_tree.sh slim      # the tree must travel in 64 MiB
#   device:  run(command="bash benchmarks/campaign300k/gpu.sh 540", timeout_s=590, carry=[".campaign_gpu"])
#   here:    bash benchmarks/campaign300k/device_tree.sh restore
#            bash benchmarks/campaign300k/gpu_results.sh FILES_AT  # unpack, publish, keep what resumes
#
# Knobs (environment), also for a dry run on a CPU: CAMPAIGN_RUNS ("ada_gvae:1,2 ada_ml_vae:1,2"), CAMPAIGN_COMPILE
# ("false reduce-overhead"), CAMPAIGN_THREADS (torch threads a run: 2), CAMPAIGN_SET (extra sweep "set" entries, "key=value; key=value", values in
# YAML), CAMPAIGN_METRICS (comma-separated: the sweeps' and the publishing's metrics, instead of the
# campaign's), CAMPAIGN_WORK (/tmp/campaign300k_gpu), PYTHON (python3), OUT (where the results go).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET="${1:-540}"
START=$(date +%s)
OUT="${OUT:?the device tool sets OUT}"
WORK="${CAMPAIGN_WORK:-/tmp/campaign300k_gpu}"
RUNS="${CAMPAIGN_RUNS:-ada_gvae:1,2 ada_ml_vae:1,2}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
mkdir -p "$OUT" "$WORK/sweep/runs"
exec > >(tee -a "$OUT/gpu.log") 2>&1
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
RESERVE=100  # seconds kept after training for the milestone scores, the publishing and the packing

echo "== versions ($(date -u +%FT%TZ))"
"$PY" - <<'PY' || { echo "disentangle does not import here: nothing trained"; exit 3; }
import torch, disentangle
print("torch", torch.__version__, "cuda", torch.version.cuda, "device",
      torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)")
PY
command -v nvidia-smi >/dev/null && nvidia-smi -L
for t in .campaign_gpu/*.tar; do
    [ -f "$t" ] && tar -xf "$t" -C "$WORK/sweep/runs" && echo "carried: $(basename "$t" .tar)"
done

echo "== the runs ($RUNS), $(left) s left"
"$PY" benchmarks/campaign300k/gpu_sweeps.py "$WORK" "$RUNS" --compile "${CAMPAIGN_COMPILE:-false reduce-overhead}" \
    --set "${CAMPAIGN_SET:-}" --metrics "${CAMPAIGN_METRICS:-}" || exit 4
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 30 > "$WORK/smi.log" &
    smi=$!
fi
pids=()
for sweep in "$WORK"/*.yaml; do
    timeout -s TERM "$(( $(left) - RESERVE ))" "$PY" -m disentangle.sweep run "$sweep" --out "$WORK/sweep" \
        --workers 1 --threads-per-run "${CAMPAIGN_THREADS:-2}" --retry-failed -q &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; echo "sweep exited $? (124: stopped at the budget, its run checkpointed)"; done
[ -n "${smi:-}" ] && kill "$smi" 2>/dev/null
[ -f "$WORK/smi.log" ] && { echo "nvidia-smi (time, utilisation, memory):"; cat "$WORK/smi.log"; }

echo "== each run"
for run in "$WORK"/sweep/runs/*/; do
    "$PY" - "$run" <<'PY'
import json, pathlib, sys, yaml
run = pathlib.Path(sys.argv[1])
config = yaml.safe_load((run / "config.yaml").read_text())
log = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()] if (run / "log.jsonl").exists() else []
rates = [r["steps_per_s"] for r in log if "steps_per_s" in r]
last = max((r["step"] for r in log), default=0)
print(f"{run.name} {config['objective']['name']} s{config['seed']} compile={config['train']['compile']}: step {last:,}, "
      f"steps/s median {sorted(rates)[len(rates) // 2] if rates else 0:.0f}, "
      f"{'finished' if (run / 'metrics.json').exists() else 'unfinished'}; failed: {(run / 'traceback.txt').exists()}")
PY
done

echo "== milestone scores, $(left) s left"
device=$("$PY" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
timeout -s TERM "$(( $(left) - 40 ))" "$PY" benchmarks/trajectories_300k.py "$WORK/sweep" --device "$device" | tail -8
cp benchmarks/campaign300k/trajectories.csv "$OUT/" 2>/dev/null

echo "== results, $(left) s left"
gpu=$("$PY" -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'CPU')")
for run in "$WORK"/sweep/runs/*/; do
    id=$(basename "$run")
    [ -f "$run/config.yaml" ] || continue
    files=()
    for f in config.yaml log.jsonl execution.jsonl metrics.json traceback.txt; do [ -f "$run/$f" ] && files+=("$id/$f"); done
    if [ -f "$run/metrics.json" ]; then  # finished: publish here, so that what comes back is the zoo's file
        read -r name recipe < <("$PY" benchmarks/campaign300k/naming.py "$run/config.yaml" gpu)
        mkdir -p "$WORK/zoo/$id"
        "$PY" -m disentangle.zoo publish "$run" --name "$name" --manifest "$WORK/zoo/$id/manifest.json" \
            --recipe "$recipe" --weights-dir "$run" --no-progress ${CAMPAIGN_METRICS:+--metrics "$CAMPAIGN_METRICS"} \
            --notes "trained on one $gpu (device tool), benchmarks/campaign300k/gpu.sh" \
            && "$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); json.dump(m['models'], open(sys.argv[2], 'w'), indent=1)" \
                "$WORK/zoo/$id/manifest.json" "$run/manifest_entry.json" \
            && files+=("$id/$name.safetensors" "$id/manifest_entry.json")
    elif [ "$(stat -c %s "$run/checkpoint.pt" 2>/dev/null || echo 0)" -lt 16000000 ]; then
        files+=("$id/checkpoint.pt")
    else
        echo "$id: its checkpoint ($(stat -c %s "$run/checkpoint.pt" 2>/dev/null || echo 0) bytes) cannot come back (16 MiB a file): only its logs do"
    fi
    tar -cf "$OUT/$id.tar" -C "$WORK/sweep/runs" "${files[@]}" && echo "$OUT/$id.tar: ${files[*]}"
done
echo "done at $(( $(date +%s) - START )) s"
