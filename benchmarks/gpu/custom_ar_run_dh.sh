#!/bin/bash
# Run dh (issue 17, P12), a survey: vLLM's compiled loop (pass_t) at 1, 2, 3, 5 and 7 loads a thread and 1-16 blocks
# on two H200s (h200x2-20261130dh-custom-ar-hypotheses.md; nothing frozen, nothing changes with it).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_dh.sh
P=h200x2-20261130dh
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step dh 0,1
