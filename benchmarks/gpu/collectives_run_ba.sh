#!/bin/bash
# Run ba (issue 17, P12): Llama TP decode steps (CUDA graph, FlashAttention forced) at points never measured,
# after RMSNorm's weight from DRAM (coldnorm): 8B and 70B at TP4 on four H200s, then at TP2 on GPUs 0-1.
# Frozen before the run: h200x4-20261128ba-predicted.txt.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_ba.sh
# Results: $OUT/results.tgz (repacked after every step): the collectives.py CSVs, their run logs, -env.txt, -main.log.
P=h200x4-20261128ba
D8=2x4096,6x8192,12x8192,24x4096
D70=2x8192,8x16384,12x4096
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
step tp4 4 0,1,2,3 120 --only e2e --e2e decode --decode $D8
step tp4-70b 4 0,1,2,3 150 --only e2e --e2e decode --tp-model llama-3.1-70b --decode $D70
step tp2 2 0,1 100 --only e2e --e2e decode --decode $D8
step tp2-70b 2 0,1 150 --only e2e --e2e decode --tp-model llama-3.1-70b --decode $D70
