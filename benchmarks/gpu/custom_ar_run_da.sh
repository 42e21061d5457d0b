#!/bin/bash
# Run da (issue 17, P12): what a pass of vLLM's custom all-reduce costs by the bytes a block keeps in flight,
# on two H200s, frozen before this lease (h200x2-20261130da-custom-ar-hypotheses.md; h200x2-20261130da-predicted.txt
# from custom_ar.py --frozen da). custom_ar.py --run da: the probes, then pass_probe (vLLM's one-stage loop, no
# barriers) on both GPUs at once at 0-7 loads from the peer, 64-512 threads and 1-8 blocks, two pass counts each.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_da.sh
P=h200x2-20261130da
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step da 0,1
