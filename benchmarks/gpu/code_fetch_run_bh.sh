#!/bin/bash
# Run bh (issue 17, P12): small kernels whose input a kernel (or the QKV GEMM) has just written,
# one H200 (code_fetch.py). Usage on the device: OUT=<dir> bash benchmarks/gpu/code_fetch_run_bh.sh
# Pre-registration: benchmarks/gpu/h200-20261128bh-producer-hypotheses.md.
P=h200-20261128bh
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
timeout -k 10 300 python benchmarks/gpu/code_fetch.py --contexts alone,fresh,fresh_kernel,producer_gemm --tests neg_strided_512,neg_strided_4096,add_vectorised_4096,neg_step_q_b8,mul_step_q_cos_b8 --out $W/$P-code-fetch.csv > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
python benchmarks/gpu/code_fetch.py --analyse $W/$P-code-fetch.csv > $W/$P-analysis.txt 2>&1
gzip -f $W/$P-code-fetch.csv
tar czf $OUT/results.tgz -C $W .
