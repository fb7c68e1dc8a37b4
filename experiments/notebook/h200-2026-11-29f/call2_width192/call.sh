#!/usr/bin/env bash
# Call 2: 192-wide wgmma tiles. (1) the tensor-core GPU tests of the new build, (2) every f16
# op-sweep instance whose schedule the change moves (76) checked against the interpreter with the
# new build, (3) old (bundle, HEAD) and new timed interleaved, 30 replays each, 3 rounds.
set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel_new dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/call2.sh $D/
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
# (1) GPU tests of the tensor-core kernels (new build)
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 200 dist/tessel/bin/tessel_tests -tc="cuda mma run*,cuda families*" > $D/tests.log 2>&1; echo "tests rc=$?" | tee -a $D/tests.log; tail -4 $D/tests.log
# (2) models, compile + check (new), compile (old), in parallel
python3 experiments/op_sweep/instances.py --out $D/models --only $(cat tmp_diag/changed_f16.txt) > /dev/null
ls $D/models/*.json | TESSEL_CACHE_DIR=/tmp/cache_new timeout 220 xargs -P 12 -I{} sh -c "$NEW run {} --device cuda --hw $HW --check --threads 4 > {}.new.check 2>&1; echo \"\$? {}\"" > $D/check_rc.txt
ls $D/models/*.json | TESSEL_CACHE_DIR=/tmp/cache_old timeout 100 xargs -P 4 -I{} sh -c "$OLD compile {} --device cuda --hw $HW > /dev/null 2>&1"
echo "checks: $(grep -c '^0 ' $D/check_rc.txt) passed of $(wc -l < $D/check_rc.txt)"; grep -v '^0 ' $D/check_rc.txt | head
# (3) interleaved timing
for r in 1 2 3; do
  for m in $D/models/*.json; do
    [[ $SECONDS -lt 560 ]] || break 2
    id=$(basename $m .json)
    o=$(TESSEL_CACHE_DIR=/tmp/cache_old timeout 30 $OLD run $m --device cuda --hw $HW --time 30 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
    n=$(TESSEL_CACHE_DIR=/tmp/cache_new timeout 30 $NEW run $m --device cuda --hw $HW --time 30 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
    echo "$r $id $o $n" >> $D/ab.txt
  done
done
python3 - $D/ab.txt <<'PY'
import sys, math, collections
rows = collections.defaultdict(list)
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) == 4: rows[p[1]].append((float(p[2]), float(p[3])))
rs = []
for k, v in sorted(rows.items()):
    med = sorted(o / n for o, n in v)[len(v) // 2]
    rs.append(med)
    print("%-55s old %.4f new %.4f  old/new %.3f" % (k, sorted(x[0] for x in v)[len(v)//2], sorted(x[1] for x in v)[len(v)//2], med))
if rs: print("geomean old/new %.3f over %d, faster %d, slower(<0.97) %d" % (math.exp(sum(map(math.log, rs)) / len(rs)), len(rs), sum(r > 1.03 for r in rs), sum(r < 0.97 for r in rs)))
PY
tar -C /tmp -czf $OUT/c2.tgz c2
