#!/bin/bash
# Run de (issue 17, P12): vLLM's compiled form throughout, frozen: its loop's pass by the loads a thread keeps in
# flight (pass_t<2-8>) against run db's form as adopted, and vllm_ar_t<2> with run dc's flat fence, on two H200s
# (h200x2-20261130de-custom-ar-hypotheses.md; h200x2-20261130de-predicted.txt from custom_ar.py --frozen de).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_de.sh
P=h200x2-20261130de
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G
echo "$(date -u +%T) start custom_ar --run de" >> $W/$P-main.log
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 300 python $G/custom_ar.py --run de --out $W/$P-custom-ar.csv > $W/$P-custom-ar-run.log 2>&1
echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
tar czf $OUT/results.tgz -C $W .
