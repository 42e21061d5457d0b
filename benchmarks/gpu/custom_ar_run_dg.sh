#!/bin/bash
# Run dg (issue 17, P12): vLLM's custom all-reduce as vLLM compiles it (vllm_ar_t<4>) on four H200s, and its loop
# (pass_t) with three loads from three peers or from one, frozen before the lease
# (h200x4-20261130dg-custom-ar-hypotheses.md; h200x4-20261130dg-predicted.txt from custom_ar.py --frozen dg).
# Needs a lease of nvidia-h200-x4. Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_dg.sh
P=h200x4-20261130dg
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step dg 0,1,2,3
