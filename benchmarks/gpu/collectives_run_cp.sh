#!/bin/bash
# Run cp (issue 17, P12): what the TP step's logits all-gather costs in the step, registered before this lease
# (h200x2-20261130cp-gather-hypotheses.md; frozen: h200x2-20261130cp-predicted.txt; `logits_gather.py --compare`).
# Llama-3.1-8B TP2 decode steps (CUDA graph, FlashAttention forced) on two H200s at large batches, each timed
# as before and right after without the gather (collectives.py --without-gather: rows *_nogather).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_cp.sh
P=h200x2-20261130cp
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
step tp2 2 0,1 400 --only e2e --e2e decode --decode 128x512,256x512,384x256,512x256,1024x128 --without-gather
