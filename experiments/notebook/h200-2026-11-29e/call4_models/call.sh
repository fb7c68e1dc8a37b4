set -u
D=/tmp/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel; chmod +x dist/tessel/libexec/tessel
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call4.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD
# the transformers and vision transformers, Tessel against PyTorch eager and torch.compile
OUT=$D TESSEL_MODELS_ARGS="--skip-bundled --time-budget 420 --only bert_base t5_small_encoder deit_small vit_b_16 gpt2 whisper_base_encoder llama_2048x4" TESSEL_MODELS_TIMEOUT=500 scripts/device_run models > $D/models.log 2>&1
echo "models rc=$?"; tail -30 $D/models.log
tar -C /tmp -czf $OUT/c4.tgz c4
