#!/bin/bash
# Run db (issue 17, P12): what a pass of vLLM's custom all-reduce costs by the loads a thread keeps in flight,
# on two H200s, frozen before this lease (h200x2-20261130db-custom-ar-hypotheses.md; h200x2-20261130db-predicted.txt
# from custom_ar.py --frozen db). custom_ar.py --run db: the probes, then pass_probe (vLLM's one-stage loop, no
# barriers) on both GPUs at once at 1-7 loads from the peer, 2-36 blocks,
# 192-512 threads (points run da never ran), two pass counts each.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_db.sh
P=h200x2-20261130db
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G
echo "$(date -u +%T) start custom_ar --run db" >> $W/$P-main.log
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 300 python $G/custom_ar.py --run db --out $W/$P-custom-ar.csv > $W/$P-custom-ar-run.log 2>&1
echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
tar czf $OUT/results.tgz -C $W .
