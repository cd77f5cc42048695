#!/usr/bin/env bash
# Make this checkout small enough for the device tool (which sends tracked and untracked-not-ignored
# files, at most 64 MiB), and put it back afterwards.
#
#   bash benchmarks/campaign300k/device_tree.sh slim      # before the device calls
#   bash benchmarks/campaign300k/device_tree.sh restore   # after them (also safe to run twice)
#
# slim takes the zoo weights (~93 MB) and the CPU campaign's resume checkpoints (~17 MB) out of git's
# index and ignores them in .git/info/exclude; the files stay on disk, and no commit changes. It
# copies the few zoo models the tests load by name into .device_zoo/weights/ (ignored): a device call
# that runs the tests carries it (carry=[".device_zoo"]) and copies it back into disentangle/zoo/weights/. restore
# puts them back in the index and removes the exclude lines. The device run needs neither: it trains
# new runs and loads no zoo model. Never commit between slim and restore (git would record the weights
# as deleted): restore first.
set -euo pipefail
cd "$(dirname "$0")/../.."
PATHS=(disentangle/zoo/weights benchmarks/campaign300k/resume)
EXCLUDE=.git/info/exclude
MARK="# device_tree.sh slim"
case "${1:-}" in
    slim)
        git rm -r -q --cached --ignore-unmatch "${PATHS[@]}"
        grep -qxF "$MARK" "$EXCLUDE" 2>/dev/null || { echo "$MARK"; printf '/%s/\n' "${PATHS[@]}"; } >> "$EXCLUDE"
        # the zoo models the tests load by name travel (untracked, carried): their fixtures fail without them
        mkdir -p .device_zoo/weights
        for name in $(grep -rhoE "(zoo:|ZOO_NAME = \")[a-z0-9_.-]+-s[0-9]+" tests | sed -E 's/^(zoo:|ZOO_NAME = ")//' | sort -u); do
            cp -f "disentangle/zoo/weights/$name.safetensors" .device_zoo/weights/ 2>/dev/null || true
        done
        grep -qxF "/.device_zoo/" "$EXCLUDE" || echo "/.device_zoo/" >> "$EXCLUDE"
        grep -qxF "/.campaign_gpu/" "$EXCLUDE" || echo "/.campaign_gpu/" >> "$EXCLUDE"
        size=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
        carried=$(du -scb .campaign_gpu .device_zoo 2>/dev/null | tail -1 | cut -f1 || true)
        echo "travels: $(( size / 1048576 )) MiB of files, $(( ${carried:-0} / 1048576 )) MiB carried" \
             "(.campaign_gpu, .device_zoo: $(ls .device_zoo/weights | wc -l) zoo models the tests load); the limit is 64 MiB"
        ;;
    restore)
        git reset -q -- "${PATHS[@]}"
        if grep -qxF "$MARK" "$EXCLUDE" 2>/dev/null; then
            python3 - "$EXCLUDE" "$MARK" "${PATHS[@]}" <<'PY'
import sys
path, mark, *paths = sys.argv[1:]
drop = {mark, *(f"/{p}/" for p in paths)}
lines = open(path).read().splitlines()
open(path, "w").write("".join(f"{line}\n" for line in lines if line not in drop))
PY
        fi
        git status --short -- "${PATHS[@]}" | head -3
        echo "restored: the weights and resume checkpoints are tracked again"
        ;;
    *)
        echo "usage: bash benchmarks/campaign300k/device_tree.sh slim|restore" >&2
        exit 2
        ;;
esac
