#!/bin/bash
# Run bm (issue 17, P12: a fair GPU side for DeepSeek-R1): MLA prefill attention on one H200 — FA2 at head_dim 192
# (V padded as vLLM does without FA3) and the whole vLLM prefill attention block: causal batch-1 SDPA on FlashAttention
# and cuDNN at 16 and 128 heads, the block timed and one call of each profiled kernel by kernel
# (sweep.py --only mla_prefill; the points: mla_prefill_points.py).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/mla_prefill_run_bm.sh
# Frozen before the run: h200-20261129bm-mla-prefill-predicted.txt (written by the lead).
P=h200-20261129bm
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
timeout -k 10 480 python benchmarks/gpu/sweep.py --out $W/$P-mla-prefill.csv --kernels $W/$P-mla-prefill-kernels.csv \
  --env $W/$P-host.txt --only mla_prefill > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
gzip -f $W/$P-mla-prefill-kernels.csv
tar czf $OUT/results.tgz -C $W .
