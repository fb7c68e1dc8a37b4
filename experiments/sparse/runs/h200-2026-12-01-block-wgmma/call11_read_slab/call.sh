#!/usr/bin/env bash
# Session 22, call 11 (1x H200): after the slab read-back became one helper (read_slab) shared by
# the dense and the 2:4 wgmma epilogues -- the GPU tests of the wgmma kernels' forms, block-sparse and 2:4.
set -u
D=$OUT/c11; mkdir -p $D; cp dist/call11.sh $D/call.sh
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
timeout 330 dist/tessel/bin/tessel_tests -tc="cuda mma run: tensor-core kernels match*,cuda mma run: the wgmma epilogue*,cuda mma run: 192-wide*,cuda mma run: the wgmma kernel with B shared*,cuda sparse run*,cuda nm sparse run*" > $D/tests.log 2>&1
echo "tests rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)|ERROR|FATAL|mismatch|SKIP" $D/tests.log | head -20 | tee -a $D/rc.txt
tar -C $OUT -czf $OUT/c11.tgz c11
