#!/bin/bash
# Runs bn, bq and bt (issue 17, P12): FlashAttention-3 on one H200 (sweep.py --only fa3_prefill, or
# with SECTION=fa3_prefill_bq RUN=h200-20261129bq run bq's points, SECTION=fa3_decode RUN=h200-20261129bt run bt's
# decode points; the points: fa3_points.py). FA3 comes from the fa3-fwd wheel (PyPI fa3-fwd 0.0.3, cp39-abi3 manylinux_2_24_x86_64,
# sha256 44d26c6cfc69dde5a0f9c6bebbccbb96ed20e97bc8b9ddda638b0bf62e91b93d: FlashAttention-3's hopper/
# forward on PyTorch's stable ABI and CUDA 13), carried in .whl (the device has no network):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_24_x86_64 -d .whl fa3-fwd==0.0.3
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/fa3_run_bn.sh
# Frozen before each run: <run>-fa3-predicted.txt and <run>-fa3-hypotheses.md.
P=${RUN:-h200-20261129bn}
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fa3_fwd-*.whl \
  && export PYTHONPATH=/tmp/site || exit 1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print(torch.__version__, torch.version.cuda)"; sha256sum .whl/fa3_fwd-*.whl; } > $W/$P-env.txt 2>&1
timeout -k 10 480 python3 benchmarks/gpu/sweep.py --out $W/$P-fa3.csv --kernels $W/$P-fa3-kernels.csv \
  --env $W/$P-host.txt --only ${SECTION:-fa3_prefill} > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
gzip -f $W/$P-fa3-kernels.csv
tar czf $OUT/results.tgz -C $W .
