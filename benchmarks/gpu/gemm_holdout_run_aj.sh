#!/bin/bash
# (ran from .gpudev/p12gemm3/ as run_aj.sh, diag.py and ncu_shapes.py: these three files, paths renamed)
#   bash benchmarks/gpu/gemm_holdout_run_aj.sh   (writes one tarball and three logs under $OUT)
# Files: $P-diag*, $P-ncu* were renamed h200-20261128aj-gemm-holdout-diag*, -ncu* when committed (the held-out
# runs' own files are left out of tests/gpu/test_gemm_holdout.py's committed-shape check by that name).
# Run aj (p12gemm3): run ag's held-out GEMMs on the H200 (gemm_holdout_run_ag.sh, prefix h200-20261128aj),
# then diagnostics: diag.py (m steps of 16 near the misses, held-out m = 129-1024 with grids), ncu if present.
# Everything lands in $OUT/w, then one tarball (at most 8 files come back).
T0=$(date +%s); FINAL=$OUT; W=$OUT/w; mkdir -p $W; P=$W/h200-20261128aj
pack() { tar czf $FINAL/h200-20261128aj-all.tar.gz -C $W . ; cp $W/*-gemm-holdout.log $W/*-diag.log $W/*-ncu.log $FINAL/ 2>/dev/null; ls -la $W; rm -rf $W; }
trap pack EXIT
OUT=$W bash benchmarks/gpu/gemm_holdout_run_ag.sh benchmarks/gpu h200-20261128aj
echo "holdout done $(( $(date +%s) - T0 )) s"
timeout 330 python benchmarks/gpu/gemm_holdout_diag.py $P $(( T0 + 390 )) > $P-diag.log 2>&1
echo "diag rc=$? $(( $(date +%s) - T0 )) s" | tee -a $P-diag.log
tail -3 $P-diag.log
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: '$NCU'" | tee $P-ncu.log
if [ -n "$NCU" ]; then
  left=$(( T0 + 485 - $(date +%s) ))
  [ $left -gt 20 ] && timeout $left $NCU --csv --kernel-name regex:nvjet --metrics \
    gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,launch__grid_size,launch__block_size,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    python benchmarks/gpu/gemm_holdout_ncu.py > $P-ncu.csv 2>> $P-ncu.log
  echo "ncu rc=$?" >> $P-ncu.log
fi
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv >> $P-ncu.log 2>&1
echo "total $(( $(date +%s) - T0 )) s"
