#!/bin/bash
# Run ag (issue 17, P12; ran from .gpudev/p12gemm2/, a copy of this file and its three scripts): one H100,
# the held-out GEMMs (sweep.py --only gemm_holdout, frozen first in h100-20261128ag-gemm-holdout-predicted.txt),
# then P10's rows and the gemm section again on the same machine (to tell it from run a's).
#   bash benchmarks/gpu/gemm_holdout_run_ag.sh [SCRIPT_DIR [PREFIX]]   (writes under $OUT)
# Run ai: PREFIX h200-20261128ai on kind nvidia-h200, which came as an H100 (files renamed h100-20261128ai-*).
# Run aj (an H200, to come): PREFIX h200-20261128aj, frozen first in h200-20261128aj-gemm-holdout-predicted.txt.
D=${1:-benchmarks/gpu}; P=$OUT/${2:-h100-20261128ag}; T0=$(date +%s)
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv; } \
  > $P-gpu-before.txt 2>&1
timeout 300 python $D/sweep.py --out $P-gemm-holdout.csv --kernels $P-gemm-holdout-kernels.csv --env $P-env.txt \
  --only gemm_holdout,p10,gemm > $P-gemm-holdout.log 2>&1
echo "rc=$? $(( $(date +%s) - T0 )) s" | tee -a $P-gemm-holdout.log
{ date -u; nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv; } > $P-gpu-after.txt 2>&1
grep "^# section\|kernels named\|failed" $P-gemm-holdout.log
