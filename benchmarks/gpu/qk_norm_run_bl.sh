#!/bin/bash
# Run bl (issue 17, P12: other model shapes): Qwen3-1.7B with its per-head QK-RMSNorm (a decode step of mostly small kernels),
# one H200: decode steps (eager, CUDA graph) and batch-1 prefills, three decode steps' graph replays profiled
# (sweep.py --only qk_norm_bl; the points: qk_norm_compare.py QK_RUNS["bl"]).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/qk_norm_run_bl.sh
# Frozen before the run: h200-20261129bl-qk-norm-predicted.txt; pre-registration: h200-20261129bl-qk-norm-hypotheses.md.
P=h200-20261129bl
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
timeout -k 10 480 python benchmarks/gpu/sweep.py --out $W/$P-qk-norm.csv --kernels $W/$P-qk-norm-kernels.csv \
  --env $W/$P-host.txt --only qk_norm_bl > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
gzip -f $W/$P-qk-norm-kernels.csv
tar czf $OUT/results.tgz -C $W .
