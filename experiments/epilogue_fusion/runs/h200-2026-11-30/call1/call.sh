#!/usr/bin/env bash
# Session 15, call 1 (1x H200): llama_mlp's fused SwiGLU epilogue vs the 4-kernel schedule, per kernel (ncu), and 128x256 vs 128x128 ping-pong tiles.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=$OUT/m1; mkdir -p $D; cp tmp_diag/callm1.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
T=dist/tessel/bin/tessel; M=tmp_diag/mlp
run() { # model sched tag
  timeout 90 $T run $M/$1.json --device cuda --hw hw_specs/nvidia-h100-sxm.json --schedule $M/$2 --check --time 50 > $D/$3.log 2>&1
  echo "$3 rc=$? $(grep -o 'median [0-9.]* ms\|MISMATCH' $D/$3.log | tr '\n' ' ')" >> $D/times.txt
}
for r in 1 2; do
  for v in fused unfused fused_pp unfused_pp; do run llama_mlp $v.sched.json mlp_$v; done
  for w in gemm_llm_up gemm_4096 bert_ffn1; do run $w $w.sched.json ${w}_def; run $w $w.alt.sched.json ${w}_alt; done
done
echo "t=$SECONDS" >> $D/times.txt
which cuobjdump nvdisasm ncu > $D/tools.txt 2>&1
NCU=$(which ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__cycles_active.avg,launch__registers_per_thread
for v in fused unfused; do
  timeout 150 $NCU --metrics $MET -k regex:tessel_ --launch-count 4 --csv $T run $M/llama_mlp.json --device cuda --hw hw_specs/nvidia-h100-sxm.json --schedule $M/$v.sched.json --time 1 --no-graph > $D/ncu_$v.csv 2> $D/ncu_$v.err
  echo "ncu $v rc=$? t=$SECONDS" >> $D/times.txt
done
cat $D/times.txt
tar -C $OUT -czf $OUT/m1.tgz m1 && rm -rf $D; ls -la $OUT
