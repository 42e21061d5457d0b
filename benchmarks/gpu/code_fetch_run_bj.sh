#!/bin/bash
# Run bj (issue 17, P12): small kernels after a kernel that streams 256 KB through every SM's L1,
# one H200 (code_fetch.py). Usage on the device: OUT=<dir> bash benchmarks/gpu/code_fetch_run_bj.sh
# Pre-registration: benchmarks/gpu/h200-20261128bj-l1-hypotheses.md.
P=h200-20261128bj
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
timeout -k 10 300 python benchmarks/gpu/code_fetch.py --contexts alone,l1_flush,fresh_kernel --tests neg_strided_512,neg_strided_4096,add_vectorised_4096,neg_heads8_of8_b8,neg_heads8_of12_b8 --out $W/$P-code-fetch.csv > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
python benchmarks/gpu/code_fetch.py --analyse $W/$P-code-fetch.csv > $W/$P-analysis.txt 2>&1
gzip -f $W/$P-code-fetch.csv
tar czf $OUT/results.tgz -C $W .
