#!/bin/bash
# Does a change alter the emitted GPU code? Emits CUDA for every GPU-suite workload, every bundled
# model and every op-sweep instance with two `tessel` binaries (OLD, NEW) for one spec, and
# compares the files (kernels and manifest.json) byte for byte. Identical code means identical
# speed, with no GPU needed. Writes one CSV line per model to stdout: model,result.
#
#   compare_emit.sh OLD_TESSEL NEW_TESSEL [SPEC]   (default spec: hw_specs/nvidia-h100-sxm.json)
set -u
OLD=$1; NEW=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SPEC=${3:-$ROOT/hw_specs/nvidia-h100-sxm.json}
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
python3 "$ROOT/experiments/workloads/workloads.py" --suite gpu --out "$WORK/models" > /dev/null 2>&1
python3 "$ROOT/experiments/op_sweep/instances.py" --out "$WORK/models" > /dev/null 2>&1
cp "$ROOT"/experiments/models/*.json "$WORK/models/"
echo "model,result"
for f in "$WORK"/models/*.json; do
  n=$(basename "$f" .json)
  # The same output directory for both: the manifest names it.
  "$OLD" compile "$f" --device cuda --hw "$SPEC" --emit cuda -o "$WORK/code" > /dev/null 2>&1; a=$?
  mv "$WORK/code" "$WORK/old" 2> /dev/null
  "$NEW" compile "$f" --device cuda --hw "$SPEC" --emit cuda -o "$WORK/code" > /dev/null 2>&1; b=$?
  mv "$WORK/code" "$WORK/new" 2> /dev/null
  if [ $a -ne 0 ] || [ $b -ne 0 ]; then echo "$n,failed(old=$a new=$b)"
  elif diff -rq "$WORK/old" "$WORK/new" > /dev/null; then echo "$n,identical"
  elif [ "$(python3 "$ROOT/experiments/emit_identity/same_kernels.py" "$WORK/old" "$WORK/new")" = identical ]; then
    echo "$n,same kernels"
  else echo "$n,differs"; fi
  rm -rf "$WORK/old" "$WORK/new"
done
