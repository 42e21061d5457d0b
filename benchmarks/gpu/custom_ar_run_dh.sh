#!/bin/bash
# Run dh (issue 17, P12), a survey: vLLM's compiled loop (pass_t) at 1, 2, 3, 5 and 7 loads a thread and 1-16 blocks
# on two H200s (h200x2-20261130dh-custom-ar-hypotheses.md; nothing frozen, nothing changes with it).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_dh.sh
P=h200x2-20261130dh
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G
echo "$(date -u +%T) start custom_ar --run dh" >> $W/$P-main.log
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 300 python $G/custom_ar.py --run dh --out $W/$P-custom-ar.csv > $W/$P-custom-ar-run.log 2>&1
echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
tar czf $OUT/results.tgz -C $W .
