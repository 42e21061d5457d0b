#!/bin/bash
# Run br (issue 17, P12; a diagnostic after runs bn and bq): FA3's varlen call (vLLM's) against flash_attn_func.
# Times both at fa3_points.VARLEN_POINTS (fa3_run_bn.sh, SECTION=fa3_varlen), then Nsight Compute on the 8K pair
# (fa3_ncu_run_bo.sh, VARLEN_NCU) with DRAM bytes, L2 hits and active cycles. Registered before it:
# h200-20261129br-fa3-hypotheses.md. Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/fa3_run_br.sh
mkdir -p $OUT/t $OUT/n
RUN=h200-20261129br SECTION=fa3_varlen OUT=$OUT/t bash benchmarks/gpu/fa3_run_bn.sh
RUN=h200-20261129br OUT=$OUT/n EXTRA=dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__cycles_active.avg,sm__cycles_elapsed.avg \
  POINTS="fa3_func_causal_b1_h16x16x192v128_l8192 fa3_varlen_causal_b1_h16x16x192v128_l8192" \
  bash benchmarks/gpu/fa3_ncu_run_bo.sh
