set -u
D=/tmp/c5; mkdir -p $D
OUT=$D scripts/device_run check > $D/check_log.txt 2>&1
echo "check rc=$?" >> $D/check_log.txt
python3 experiments/notebook/h100-2026-11-28/compare.py > $D/compare.txt 2>&1
cp experiments/results/h100/2026-11-28/compare.png $D/ 2>/dev/null
cp tmp_call5.sh $D/call.sh
tar -C /tmp -czf $OUT/c5.tgz c5
tail -25 $D/check_log.txt; cat $D/compare.txt
