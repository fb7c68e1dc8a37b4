set -u
D=/tmp/c3; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call3.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
T=dist/tessel/bin/tessel; SPEC=hw_specs/nvidia-h100-sxm.json
# 1. the GPU tests this change touches
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda families*,cuda sparse*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
tail -4 $D/tests.log
# 2. A/B: the old binary's schedules (before) against this binary's (after)
IDS=$(ls tmp_ab/schedules | sed 's/\.before\.json$//; /\.m128n64\.json$/d' | tr '\n' ' ')
timeout 300 python3 experiments/family_ranking/run_ab.py --tessel $T --schedules tmp_ab/schedules --out $D/ab --jobs 16 --ids $IDS > $D/ab_log.txt 2>&1; echo "ab rc=$?" >> $D/ab_log.txt
rm -rf $D/ab/work
tail -40 $D/ab_log.txt
tar -C /tmp -czf $OUT/c3.tgz c3
