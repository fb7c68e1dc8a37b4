#!/usr/bin/env bash
# Interleaved A/B of two Tessel builds on the GPU (the method of runs/h200-2026-11-30/call3_ab):
# the suite's resnet_block and the op-sweep instances listed in instances.txt (the 14 1x1
# convolutions whose plans 4c5d5a7 changed); NEW runs each with --check first, then ROUNDS rounds
# of `tessel run --time 30` per build, alternating (GPU time: CUDA-graph replays between events,
# L2 warm). Writes OUT/ab.txt, OUT/ab.csv and OUT/ab.svg.
#
#   experiments/conv_as_gemm/run_ab.sh OLD_TESSEL NEW_TESSEL OUT [ROUNDS]
set -uo pipefail
cd "$(dirname "$0")/../.."
old=$1 new=$2 out=$3 rounds=${4:-2}
hw=hw_specs/nvidia-h100-sxm.json
mkdir -p "$out"
work=$(mktemp -d)
python3 experiments/op_sweep/instances.py --catalog gpu --out "$work/gi" > /dev/null
python3 experiments/workloads/workloads.py --suite gpu --out "$work/wl" --only resnet_block > /dev/null
models="$work/wl/resnet_block.json"
for i in $(cat experiments/conv_as_gemm/instances.txt); do models="$models $work/gi/$i.json"; done
med() { grep -o "median [0-9.]* ms" | head -1 | awk '{print $2}'; }
: > "$out/ab.txt"
for m in $models; do
  i=$(basename "$m" .json)
  TESSEL_CACHE_DIR=$work/cache_new timeout 90 "$new" run "$m" --device cuda --hw $hw --check > "$out/$i.check.log" 2>&1; c=$?
  TESSEL_CACHE_DIR=$work/cache_old timeout 90 "$old" run "$m" --device cuda --hw $hw > /dev/null 2>&1
  line="$i check_rc=$c"
  for r in $(seq 1 "$rounds"); do
    o=$(TESSEL_CACHE_DIR=$work/cache_old timeout 60 "$old" run "$m" --device cuda --hw $hw --time 30 2>&1 | med)
    n=$(TESSEL_CACHE_DIR=$work/cache_new timeout 60 "$new" run "$m" --device cuda --hw $hw --time 30 2>&1 | med)
    line="$line old$r=$o new$r=$n"
  done
  echo "$line" | tee -a "$out/ab.txt"
done
python3 - "$out" <<'PY'
import csv, sys
out = sys.argv[1]
rows = []
for line in open(out + "/ab.txt"):
    f = line.split()
    d = dict(x.split("=", 1) for x in f[1:])
    o = [float(v) for k, v in d.items() if k.startswith("old") and v]
    n = [float(v) for k, v in d.items() if k.startswith("new") and v]
    row = {"workload": f[0], "check_rc": d["check_rc"]}
    row.update({k: v for k, v in d.items() if k != "check_rc"})
    row["speedup"] = round(sum(o) / len(o) / (sum(n) / len(n)), 3) if o and n else ""
    rows.append(row)
keys = list(dict.fromkeys(k for r in rows for k in r))
with open(out + "/ab.csv", "w", newline="") as fh:
    w = csv.DictWriter(fh, fieldnames=keys)
    w.writeheader()
    w.writerows(rows)
PY
python3 experiments/conv_as_gemm/plot_ab.py "$out/ab.csv" "$out/ab.svg"
rm -rf "$work"
