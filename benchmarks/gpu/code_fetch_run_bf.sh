#!/bin/bash
# Run bf (issue 17, P12): the strided negation on views of 2, 3 and 4 dimensions and the step's own RoPE operands,
# timed alone, one H200 (code_fetch.py --dims). Usage on the device: OUT=<dir> bash benchmarks/gpu/code_fetch_run_bf.sh
# Pre-registration: benchmarks/gpu/h200-20261128bf-dims-hypotheses.md.
P=h200-20261128bf
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
timeout -k 10 300 python benchmarks/gpu/code_fetch.py --dims --contexts alone,gemm --out $W/$P-code-fetch.csv > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
python benchmarks/gpu/code_fetch.py --analyse $W/$P-code-fetch.csv > $W/$P-analysis.txt 2>&1
gzip -f $W/$P-code-fetch.csv
tar czf $OUT/results.tgz -C $W .
