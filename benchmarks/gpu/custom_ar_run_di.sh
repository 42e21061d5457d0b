#!/bin/bash
# Run di (issue 17, P12): vLLM's compiled loop (pass_t) at loads x blocks runs da-dh never ran, frozen on two forms
# that share the lone-block line of runs de, df and dh, on two H200s (h200x2-20261130di-custom-ar-hypotheses.md;
# h200x2-20261130di-predicted.txt from custom_ar.py --frozen di).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_di.sh
P=h200x2-20261130di
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step di 0,1
