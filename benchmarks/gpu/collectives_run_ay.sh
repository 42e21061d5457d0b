#!/bin/bash
# Run ay (issue 17, P12): Llama TP decode steps (CUDA graph, FlashAttention forced) at points never measured,
# after the H200's split-KV fixed times (fa2fix): 8B TP4 and 70B TP4 on four H200s, 8B TP2 on GPUs 0-1.
# Frozen before the run: h200x4-20261128ay-tp4-predicted.txt (and, for comparison, the model before fa2fix).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_ay.sh
# Results: $OUT/results.tgz (repacked after every step): the collectives.py CSVs, their run logs, -env.txt, -main.log.
P=h200x4-20261128ay
D8=1x2048,1x16384,2x8192,4x8192,16x8192,1x32768
D70=1x16384,4x8192,16x4096
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
step tp4 4 0,1,2,3 150 --only e2e --e2e decode --decode $D8
step tp4-70b 4 0,1,2,3 200 --only e2e --e2e decode --tp-model llama-3.1-70b --decode $D70
step tp2 2 0,1 120 --only e2e --e2e decode --decode $D8
