#!/bin/bash
# Run bd (issue 17, P12): small kernels after a walk over 512 or 8192 2-MiB pages, one H200 (code_fetch.py).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/code_fetch_run_bd.sh
# Pre-registration: benchmarks/gpu/h200-20261128bd-pages-hypotheses.md.
P=h200-20261128bd
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
timeout -k 10 400 python benchmarks/gpu/code_fetch.py --out $W/$P-code-fetch.csv \
  --contexts alone,pages_1g,pages_16g,code,data > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
python benchmarks/gpu/code_fetch.py --analyse $W/$P-code-fetch.csv > $W/$P-analysis.txt 2>&1
gzip -f $W/$P-code-fetch.csv
tar czf $OUT/results.tgz -C $W .
