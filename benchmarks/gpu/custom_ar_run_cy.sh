#!/bin/bash
# Run cy (issue 17, P12): the two-stage custom all-reduce's release barrier on two H200s, frozen before this lease
# (h200x2-20261130cy-custom-ar-hypotheses.md; h200x2-20261130cy-predicted.txt from custom_ar.py --frozen, now --frozen cy).
# custom_ar.py --run cy: the probes, the two-stage kernel with nothing to sum at 1-64 blocks, both kernels at
# 2-48 forced blocks through 384 KiB-6 MiB (rows never measured), each trial queued behind a sleep on both GPUs.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_cy.sh
P=h200x2-20261130cy
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G
echo "$(date -u +%T) start custom_ar --run cy" >> $W/$P-main.log
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 240 python $G/custom_ar.py --run cy --out $W/$P-custom-ar.csv > $W/$P-custom-ar-run.log 2>&1
echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
tar czf $OUT/results.tgz -C $W .
