#!/usr/bin/env bash
# Call 1: where the wgmma GEMMs lose to cuBLAS. (1) op-sweep timing of 12 GEMMs with baselines,
# (2) --tune 24 trials per GEMM (is it the choice or the kernel?), (3) ncu sections on 4 shapes,
# Tessel and cuBLAS, clocks and caches as in a replay.
set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/*.sh tmp_diag/*.py $D/ 2>/dev/null
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tcache
T=dist/tessel/bin/tessel; HW=hw_specs/nvidia-h100-sxm.json
IDS="gemm.bert.attn_out.m512.f16 gemm.gpt2.attn_out.m1024.f16 gemm.gpt2.qkv.m1024.f16 gemm.gpt2.ffn_up.m1024.f16 gemm.gpt2.ffn_down.m1024.f16 gemm.vit_b16.attn_out.m197.f16 gemm.sd_unet.cross_kv_c320.m154.f16 gemm.vit_l16.ffn_down.m6304.f16 gemm.vit_b16.attn_out.m6304.f16 gemm.llama7b.o.m2048.f16 gemm.gpt2.lm_head.m8192.f16 gemm.llama7b.gate_up_swiglu.m8192.f16"
python3 experiments/op_sweep/instances.py --out $D/models --only $IDS > /dev/null
# (1) sweep timing with baselines
timeout 170 python3 experiments/op_sweep/run_sweep.py --tessel $T --out $D/sweep --only $IDS --torch-workers 8 > $D/sweep.log 2>&1
echo "sweep rc=$?"; tail -3 $D/sweep.log
# (3) ncu: Tessel's kernel and cuBLAS's on four shapes
NCU="ncu --clock-control none --cache-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed --csv --page details"
for id in gemm.bert.attn_out.m512.f16 gemm.gpt2.ffn_up.m1024.f16 gemm.vit_l16.ffn_down.m6304.f16 gemm.llama7b.o.m2048.f16; do
  timeout 40 $NCU $T run $D/models/$id.json --device cuda --hw $HW > $D/ncu_tessel_$id.csv 2> $D/ncu_tessel_$id.err
done
timeout 100 $NCU -k regex:'^(?!.*(elementwise|fill|distribution|copy|reduce)).*' python3 tmp_diag/torch_gemms.py > $D/ncu_torch.csv 2> $D/ncu_torch.err
python3 tmp_diag/ncu_digest.py $D/ncu_tessel_*.csv $D/ncu_torch.csv > $D/ncu_digest.txt 2>&1; head -120 $D/ncu_digest.txt
# (2) measured top-24 per GEMM
for id in gemm.bert.attn_out.m512.f16 gemm.gpt2.qkv.m1024.f16 gemm.gpt2.ffn_up.m1024.f16 gemm.vit_b16.attn_out.m197.f16 gemm.vit_l16.ffn_down.m6304.f16 gemm.llama7b.o.m2048.f16 gemm.gpt2.lm_head.m8192.f16; do
  [[ $SECONDS -lt 540 ]] || break
  timeout 40 $T schedule $D/models/$id.json --hw $HW --tune 16 -o $D/tune_$id.json > $D/tune_$id.log 2>&1 || echo "tune $id rc=$?"
done
python3 tmp_diag/trials.py $D/tune_*.json > $D/trials.txt 2>&1; head -80 $D/trials.txt
tar -C /tmp -czf $OUT/c1.tgz c1
