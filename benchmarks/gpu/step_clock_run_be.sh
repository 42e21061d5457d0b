#!/bin/bash
# Run be (issue 17, P12): Llama-3.1-8B's TP4 shard step profiled after idle and after 3 s back to back, one H200
# (step_clock.py), nvidia-smi's SM clock and power every 20 ms beside it (epoch seconds, MHz, W).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/step_clock_run_be.sh
# Pre-registration: benchmarks/gpu/h200-20261128be-step-clock-hypotheses.md.
P=h200-20261128be
W=/tmp/w; mkdir -p $W; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
nvidia-smi -i 0 --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 \
  | while IFS= read -r l; do echo "$(date +%s.%N),$l"; done > $W/$P-smi.csv &
SMI=$!
OUT=$W timeout -k 10 300 python benchmarks/gpu/step_clock.py > $W/$P-run.log 2>&1
echo "rc=$?" >> $W/$P-run.log
kill $SMI; pkill -f "nvidia-smi -i 0 --query-gpu=clocks.sm" ; sleep 1
for f in $W/stepclock-*; do mv "$f" "$W/$P-${f##*/stepclock-}"; done
python benchmarks/gpu/step_clock.py --clock $W/$P-smi.csv $W/$P-marks.csv > $W/$P-clock.txt 2>&1
gzip -f $W/$P-*-kernels.csv $W/$P-smi.csv
tar czf $OUT/results.tgz -C $W .
