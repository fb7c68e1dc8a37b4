#!/usr/bin/env bash
# Session 17, call 9 (1x H200): the GPU tests of the 2:4 kernels with each case pinned to its
# kernel (wgmma.sp for four cases, mma.sp for four), on the final kernel.
D=$OUT/q9; mkdir -p $D; cp tmp_diag/nm/call9.sh $D/call.sh
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
TESSEL_CACHE_DIR=/tmp/tc timeout 300 dist/tessel/bin/tessel_tests -tc="cuda nm sparse*,cuda sparse run*" > $D/tests.log 2>&1
echo "tests rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)|ERROR|FATAL|error" $D/tests.log | head -30 | tee -a $D/rc.txt
