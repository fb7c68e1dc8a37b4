#!/usr/bin/env bash
# Call 1: GEMM epilogue study. cuBLAS beside; old (b927ac7) / new interleaved on GEMM models; ncu per-SASS counts of the new fc1/qkv/fc2.
set -u
D=/tmp/p1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; chmod +x dist/tessel/libexec/tessel_new
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callp1.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
timeout 60 python3 tmp_diag/torch_gm.py tmp_diag/gm > $D/torch.txt 2>&1; cat $D/torch.txt
for f in tmp_diag/gm/*.json; do
  id=$(basename $f .json)
  r=$(TESSEL_CACHE_DIR=/tmp/cache_new timeout 40 $NEW run $f --device cuda --hw $HW --check 2>&1 | grep -o "relative L2 error [0-9.e-]*\|mismatch.*\|rror.*" | head -1)
  echo "$id new $r" | tee -a $D/check.txt
done; echo "t=$SECONDS"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for id in deit_fc1 deit_qkv deit_fc2; do
  TESSEL_CACHE_DIR=/tmp/cache_new timeout 60 $ncu --set full --import-source no -k regex:tessel_ -o $D/$id $NEW run tmp_diag/gm/$id.json --device cuda --hw $HW > $D/$id.ncu.log 2>&1
  timeout 60 $ncu -i $D/$id.ncu-rep --page source --csv --print-source sass > $D/$id.sass.csv 2>$D/$id.sass.err
  timeout 60 $ncu -i $D/$id.ncu-rep --page details --csv > $D/$id.details.csv 2>/dev/null
  python3 tmp_diag/ncu_digest.py $D/$id.details.csv | head -4
  wc -c $D/$id.sass.csv; head -c 600 $D/$id.sass.err
done; echo "t=$SECONDS"
timeout $((560 - SECONDS)) python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab.csv $((540 - SECONDS)) tmp_diag/gm/*.json > $D/ab.txt 2>&1; cat $D/ab.txt
rm -f $D/*.ncu-rep
tar -C /tmp -czf $OUT/p1.tgz p1
