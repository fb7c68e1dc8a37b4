#!/usr/bin/env bash
# Forced wgmma tile variants of mid-size transformer GEMMs (64/128 rows x 64-256 columns, split 1/2).
set -u
D=/tmp/p3; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
T=$PWD/dist/tessel/bin/tessel; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callp3.sh $D/
one() {
  id=$1; name=$2
  r=$(timeout 60 $T run tmp_diag/gm/$id.json --schedule tmp_diag/vs/$name.sched.json --device cuda --hw $HW --check --time 50 --time-lock /tmp/p3.lock 2>&1)
  echo "$name $(echo "$r" | grep -o 'median [0-9.]* ms') $(echo "$r" | grep -o 'relative L2 error [0-9.e-]*\|mismatch' | head -1)"
}
export -f one; export T HW
timeout 540 xargs -P 6 -L 1 bash -c 'one $0 $1' < tmp_diag/vs/list.txt > $D/variants.txt 2>&1
sort $D/variants.txt | head -200
tar -C /tmp -czf $OUT/p3.tgz p3
