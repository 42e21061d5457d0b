#!/bin/bash
# Run df (issue 17, P12): vLLM's compiled loop (pass_t) at points runs da-de never ran, frozen with a pass run cx's
# and run de's cost for each further load a thread keeps in flight, on two H200s
# (h200x2-20261130df-custom-ar-hypotheses.md; h200x2-20261130df-predicted.txt from custom_ar.py --frozen df).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_df.sh
P=h200x2-20261130df
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step df 0,1
