#!/usr/bin/env bash
# After a device call of benchmarks/campaign300k/gpu.sh: take its results in.
#
#   bash benchmarks/campaign300k/gpu_results.sh FILES_AT [GPU_SWEEP_DIR]   # default ~/campaign300k/gpu/zoo_sprites_ref300k
#
# * each <run id>.tar is unpacked into GPU_SWEEP_DIR/runs/ (unless a copy there is at a later step);
# * a finished run (published on the device) goes into the zoo: its weights into
#   disentangle/zoo/weights/ and its record into the manifest, then `zoo verify` checks the file;
# * an unfinished run's tar is kept in .campaign_gpu/ (ignored by git), which the next call carries
#   (carry=[".campaign_gpu"]) so that gpu.sh resumes it; a finished run's is removed from there;
# * trajectories.csv's rows of these runs replace this checkout's rows of the same run and step in
#   benchmarks/campaign300k/trajectories.csv;
# * gpu.log is kept beside the sweep folder as gpu-<UTC time>.log.
# Then: python docs/hooks/generated.py, and commit the weights, the manifest and the generated docs.
set -euo pipefail
cd "$(dirname "$0")/../.."
FILES="${1:?usage: gpu_results.sh FILES_AT [GPU_SWEEP_DIR]}"
SWEEP="${2:-$HOME/campaign300k/gpu/zoo_sprites_ref300k}"
[ -d .venv ] && source .venv/bin/activate
mkdir -p "$SWEEP/runs" .campaign_gpu
grep -qxF "/.campaign_gpu/" .git/info/exclude 2>/dev/null || echo "/.campaign_gpu/" >> .git/info/exclude
step_of() {  # the step of a checkpoint, or -1
    python - "$1" <<'PY' 2>/dev/null || echo -1
import sys, torch
print(int(torch.load(sys.argv[1], map_location="cpu", weights_only=True, mmap=True)["step"]))
PY
}
ids=()
for tar in "$FILES"/*.tar; do
    [ -f "$tar" ] || continue
    id=$(basename "$tar" .tar)
    ids+=("$id")
    tmp=$(mktemp -d)
    tar -xf "$tar" -C "$tmp"
    here="$SWEEP/runs/$id"
    mkdir -p "$here"
    if [ -f "$tmp/$id/manifest_entry.json" ]; then  # finished and published on the device
        rm -f "$here/checkpoint.pt" "$here/checkpoint.prev.pt"
        cp "$tmp/$id"/* "$here/"
        python - "$here" <<'PY'
import json, shutil, sys
from pathlib import Path
from disentangle.zoo.manifest import SHIPPED_MANIFEST, write_entry
here = Path(sys.argv[1])
for name, record in json.loads((here / "manifest_entry.json").read_text()).items():
    record["file"] = f"weights/{name}.safetensors"
    shutil.copyfile(here / f"{name}.safetensors", SHIPPED_MANIFEST.parent / record["file"])
    write_entry(SHIPPED_MANIFEST, name, record)
    print(f"published {name} (trained_steps {record['trained_steps']:,})")
PY
        for weights in "$here"/*.safetensors; do python -m disentangle.zoo verify "$(basename "$weights" .safetensors)"; done
        rm -f ".campaign_gpu/$id.tar"
    elif [ -f "$tmp/$id/checkpoint.pt" ]; then
        if [ -f "$here/checkpoint.pt" ] && [ "$(step_of "$here/checkpoint.pt")" -gt "$(step_of "$tmp/$id/checkpoint.pt")" ]; then
            echo "keep $here (past the device's step)"
        else
            rm -f "$here/checkpoint.prev.pt"
            cp "$tmp/$id"/* "$here/"
            cp "$tar" ".campaign_gpu/$id.tar"
            echo "$id: step $(step_of "$here/checkpoint.pt"), kept in .campaign_gpu/ for the next device call"
        fi
    else
        cp -n "$tmp/$id"/* "$here/"
        echo "$id: logs only (its checkpoint could not come back)"
    fi
    rm -rf "$tmp"
done
if [ -f "$FILES/trajectories.csv" ] && [ ${#ids[@]} -gt 0 ]; then
    python - "$FILES/trajectories.csv" benchmarks/campaign300k/trajectories.csv "${ids[@]}" <<'PY'
import csv, sys
device_csv, local_csv, *ids = sys.argv[1:]
def read(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)
fields, local = read(local_csv)
_, device = read(device_csv)
new = {(r["run_id"], r["step"]): r for r in device if r["run_id"] in ids}
rows = [r for r in local if (r["run_id"], r["step"]) not in new] + list(new.values())
rows.sort(key=lambda r: (r["run_id"], int(r["step"])))
with open(local_csv + ".tmp", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=fields)
    writer.writeheader()
    writer.writerows({k: r.get(k, "") for k in fields} for r in rows)
import os; os.replace(local_csv + ".tmp", local_csv)
print(f"trajectories.csv: {len(new)} rows of {len(set(i for i, _ in new))} GPU runs merged")
PY
fi
[ -f "$FILES/gpu.log" ] && cp "$FILES/gpu.log" "$(dirname "$SWEEP")/gpu-$(date -u +%Y%m%dT%H%M%SZ).log"
ls .campaign_gpu
