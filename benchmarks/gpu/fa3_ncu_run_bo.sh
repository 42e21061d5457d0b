#!/bin/bash
# Run bo (issue 17, P12; a diagnostic after run bn): Nsight Compute on one FlashAttention-3 forward call at six
# points (fa3_ncu.py; the fa3-fwd wheel carried in .whl as for run bn, fa3_run_bn.sh): its SM clock (no clock
# control), the tensor and XU (MUFU) pipes' utilisation, issue activity, instruction mix.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/fa3_ncu_run_bo.sh
# Run bp: RUN=h200-20261129bp POINTS="<fa3_points.NCU_POINTS' names>" bash benchmarks/gpu/fa3_ncu_run_bo.sh
# Run br: RUN=h200-20261129br POINTS="<fa3_points.VARLEN_NCU's names>" EXTRA=<metrics> (fa3_run_br.sh)
P=${RUN:-h200-20261129bo}
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fa3_fwd-*.whl \
  && export PYTHONPATH=/tmp/site || exit 1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; ncu --version; } > $W/$P-env.txt 2>&1
ncu --query-metrics 2>/dev/null | grep -E "pipe_(tensor|xu|fma|alu|fp16)|issue_active|inst_executed_pipe" > $W/$P-metric-names.txt
# the FA3 kernel is cutlass::device_kernel<...FlashAttnFwdSm90...> (ncu matches the short name)
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
M=$M,sm__inst_executed_pipe_xu.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active
M=$M,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_alu.sum,sm__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
M=$M${EXTRA:+,$EXTRA}  # run br: EXTRA=dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__cycles_active.avg,sm__cycles_elapsed.avg
PTS=${POINTS:-"fa3_func_causal_b1_h16x16x128v128_l16384 fa3_func_causal_b1_h32x32x64v64_l16384
  fa3_func_causal_b1_h8x8x256v256_l16384 fa3_func_noncausal_b1_h16x16x128v128_l16384
  fa3_func_causal_b1_h16x16x192v128_l16384 fa3_func_causal_b4_h16x16x128v128_l4096"}
for pt in $PTS; do
  timeout -k 10 150 ncu --clock-control none -k regex:device_kernel -s 2 -c 1 --metrics $M \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section SchedulerStats \
    --section WarpStateStats --section LaunchStats --page raw --csv \
    python3 benchmarks/gpu/fa3_ncu.py $pt > $W/$P-$pt.csv 2> $W/$P-$pt.err
  echo "$pt rc=$?" >> $W/$P-run.log
done
tar czf $OUT/results.tgz -C $W .
# (committed: the six CSVs gzipped; the run log holds the first call's six lines too, when ncu matched no
# kernel by FA3's long name, then this call's)
