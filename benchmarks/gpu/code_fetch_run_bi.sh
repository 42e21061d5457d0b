#!/bin/bash
# Run bi (issue 17, P12): the strided negation of 8 or 12 heads of 8-16 a row, alone and after a kernel wrote its input,
# one H200 (code_fetch.py). Usage on the device: OUT=<dir> bash benchmarks/gpu/code_fetch_run_bi.sh
# Pre-registration: benchmarks/gpu/h200-20261128bi-views-hypotheses.md.
P=h200-20261128bi
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
timeout -k 10 300 python benchmarks/gpu/code_fetch.py --contexts alone,fresh_kernel --tests neg_heads8_of8_b8,neg_heads8_of12_b8,neg_heads8_of16_b8,neg_heads12_of12_b8,neg_heads8_of12_b1,neg_step_q_b8 --out $W/$P-code-fetch.csv > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
python benchmarks/gpu/code_fetch.py --analyse $W/$P-code-fetch.csv > $W/$P-analysis.txt 2>&1
gzip -f $W/$P-code-fetch.csv
tar czf $OUT/results.tgz -C $W .
