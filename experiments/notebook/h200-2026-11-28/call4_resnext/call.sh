set -u
D=/tmp/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call4.sh $D/call.sh
OUT=$D TESSEL_MODELS_ARGS="--only resnext50 --skip-bundled --time-budget 170 --call-limit 185" TESSEL_MODELS_TIMEOUT=195 scripts/device_run models > $D/models_log.txt 2>&1
tail -6 $D/models_log.txt
tar -C /tmp -czf $OUT/c4.tgz c4
