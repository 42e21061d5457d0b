#!/bin/bash
# Run cz (issue 17, P12): vLLM's custom all-reduce on four H200s, frozen before this lease
# (h200x4-20261130cz-custom-ar-hypotheses.md; h200x4-20261130cz-predicted.txt from custom_ar.py --frozen cz).
# custom_ar.py --run cz: the probes (GPUs 0 and 1), vLLM's kernels on four ranks (vllm_ar_n), each trial queued
# behind a sleep on every GPU; then NCCL's all-reduce at 4 ranks at the same sizes (collectives.py, graph and queued).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_cz.sh
P=h200x4-20261130cz
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
echo "$(date -u +%T) start custom_ar --run cz" >> $W/$P-main.log
CUDA_VISIBLE_DEVICES=0,1,2,3 timeout -k 10 300 python $G/custom_ar.py --run cz --out $W/$P-custom-ar.csv > $W/$P-custom-ar-run.log 2>&1
echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
tar czf $OUT/results.tgz -C $W .
Z=1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216
step nccl 4 0,1,2,3 240 --only collectives --ops all_reduce --modes graph,queued --sizes $Z
