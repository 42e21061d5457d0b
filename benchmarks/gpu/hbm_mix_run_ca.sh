#!/bin/bash
# Run ca (issue 17, P12): HBM's rate by read/write mix and the flush's cost to the kernel after it
# (hbm_mix.py), then FA3's and FA2's decode calls after the dirty and the clean state, on one H200.
# Hypotheses: h200-20261129ca-hbm-hypotheses.md (committed before the run). FA3 from the carried
# fa3-fwd wheel (see fa3_run_bn.sh). Usage on the device, from the repo root:
#   OUT=<dir> bash benchmarks/gpu/hbm_mix_run_ca.sh
P=${RUN:-h200-20261129ca}
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fa3_fwd-*.whl \
  && export PYTHONPATH=/tmp/site || exit 1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python3 -c "import torch, cupy; print(torch.__version__, torch.version.cuda, cupy.__version__)"; } > $W/$P-env.txt 2>&1
timeout -k 10 400 python3 benchmarks/gpu/hbm_mix.py --out $W/$P-hbm.csv --attention $W/$P-hbm-attn.csv > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
python3 benchmarks/gpu/hbm_mix.py --analyse $W/$P-hbm.csv --attn $W/$P-hbm-attn.csv > $W/$P-hbm-analysis.txt 2>&1
tar czf $OUT/results.tgz -C $W .
