set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call1.sh $D/call.sh
timeout 520 python3 experiments/family_ranking/run_ab.py --tessel dist/tessel/bin/tessel --out $D/ab --jobs 16 > $D/ab_log.txt 2>&1; echo "ab rc=$?" >> $D/ab_log.txt
rm -rf $D/ab/work
tail -60 $D/ab_log.txt
tar -C /tmp -czf $OUT/c1.tgz c1
