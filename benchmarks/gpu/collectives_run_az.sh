#!/bin/bash
# Run az (issue 17, P12): Llama TP prefill steps (eager, FlashAttention forced) at prompt lengths never measured,
# after prefill lost its O transpose and the H200's strided kernels took the H100's absolute rate: 8B and 70B at
# TP4 on four H200s, then at TP2 on GPUs 0-1.
# Frozen before the run: h200x4-20261128az-predicted.txt.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_az.sh
# Results: $OUT/results.tgz (repacked after every step): the collectives.py CSVs, their run logs, -env.txt, -main.log,
# and nvidia-smi's SM clock and power every 100 ms (-smi.csv).
P=h200x4-20261128az
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv -lms 100 > $W/$P-smi.csv 2>&1 &
SMI=$!
step tp4 4 0,1,2,3 120 --only e2e --e2e prefill --prefill 2048,8192,32768
step tp4-70b 4 0,1,2,3 150 --only e2e --e2e prefill --tp-model llama-3.1-70b --prefill 2048,8192,16384
step tp2 2 0,1 120 --only e2e --e2e prefill --prefill 2048,8192,32768
step tp2-70b 2 0,1 150 --only e2e --e2e prefill --tp-model llama-3.1-70b --prefill 2048,8192
kill $SMI; tar czf $OUT/results.tgz -C $W .
