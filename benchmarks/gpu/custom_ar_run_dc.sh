#!/bin/bash
# Run dc (issue 17, P12): the two-stage custom all-reduce's release barrier as a flat fence,
# on two H200s, frozen before this lease (h200x2-20261130dc-custom-ar-hypotheses.md; h200x2-20261130dc-predicted.txt
# from custom_ar.py --frozen dc). custom_ar.py --run dc: the probes, then the two-stage kernel with nothing to sum
# at 3, 12 and 48 blocks, and vLLM's two-stage kernel at 1-36 blocks through 3 KiB-6 MiB (never measured).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_dc.sh
P=h200x2-20261130dc
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G
echo "$(date -u +%T) start custom_ar --run dc" >> $W/$P-main.log
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 300 python $G/custom_ar.py --run dc --out $W/$P-custom-ar.csv > $W/$P-custom-ar-run.log 2>&1
echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
tar czf $OUT/results.tgz -C $W .
