#!/usr/bin/env bash
# Call 1 (64-row wgmma blocks): (1) the tensor-core GPU tests of the new build, (2) every op-sweep
# instance whose schedule the change moves (46) checked against the interpreter with the new
# build, (3) old (HEAD 64f9a66) and new timed interleaved, 30 replays each, f16 first.
set -u
D=/tmp/c64a; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
for b in tessel tessel_head tessel_tests; do xz -dc tmp_variants/$b.xz > dist/tessel/libexec/${b}_x; chmod +x dist/tessel/libexec/${b}_x; done
mv dist/tessel/libexec/tessel_tests_x dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_x"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new
sed 's|libexec/tessel"|libexec/tessel_head_x"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_old; chmod +x dist/tessel/bin/tessel_*
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/call64a.sh tmp_diag/changed64.txt $D/
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel_old; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 170 dist/tessel/bin/tessel_tests -tc="cuda mma run: 64-row*,cuda mma run: 192*,cuda mma run: the tensor-core variants*,cuda mma run: tensor-core kernels match*" > $D/tests.log 2>&1; echo "tests rc=$?" | tee -a $D/tests.log; tail -3 $D/tests.log
python3 experiments/op_sweep/instances.py --out $D/models --only $(cat tmp_diag/changed64.txt) > /dev/null
ls $D/models/*.json | TESSEL_CACHE_DIR=/tmp/cache_new timeout 150 xargs -P 12 -I{} sh -c "$NEW run {} --device cuda --hw $HW --check --threads 4 > {}.new.check 2>&1; echo \"\$? {}\"" > $D/check_rc.txt
echo "checks: $(grep -c '^0 ' $D/check_rc.txt) passed of $(wc -l < $D/check_rc.txt)"; grep -v '^0 ' $D/check_rc.txt | head
ls $D/models/*.json | TESSEL_CACHE_DIR=/tmp/cache_old timeout 60 xargs -P 8 -I{} sh -c "$OLD compile {} --device cuda --hw $HW > /dev/null 2>&1"
for r in 1 2 3; do
  for m in $(ls $D/models/*.f16.json) $(ls $D/models/*.bf16.json); do
    [[ $SECONDS -lt 570 ]] || break 2
    id=$(basename $m .json)
    o=$(TESSEL_CACHE_DIR=/tmp/cache_old timeout 20 $OLD run $m --device cuda --hw $HW --time 30 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
    n=$(TESSEL_CACHE_DIR=/tmp/cache_new timeout 20 $NEW run $m --device cuda --hw $HW --time 30 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
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
    print("%-55s old %.4f new %.4f  old/new %.3f (%d rounds)" % (k, sorted(x[0] for x in v)[len(v)//2], sorted(x[1] for x in v)[len(v)//2], med, len(v)))
if rs: print("geomean old/new %.3f over %d, faster %d, slower(<0.97) %d" % (math.exp(sum(map(math.log, rs)) / len(rs)), len(rs), sum(r > 1.03 for r in rs), sum(r < 0.97 for r in rs)))
PY
tar -C /tmp -czf $OUT/c64a.tgz c64a
