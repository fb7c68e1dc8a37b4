set -u
D=/tmp/c1; mkdir -p $D
OUT=$D TESSEL_MODELS_ARGS="--only convnext_tiny vit_b_16 deit_small --skip-bundled --time-budget 500 --call-limit 560" TESSEL_MODELS_TIMEOUT=570 scripts/device_run models > $D/log.txt 2>&1
cp tmp_call1.sh $D/call.sh
tar -C /tmp -czf $OUT/c1.tgz c1
tail -30 $D/log.txt
