#!/bin/bash
# Run dd (issue 17, P12): vLLM's custom all-reduce kernels as vLLM compiles them (ngpus a template parameter,
# vllm_ar_t) against the emulation runs cw-dc timed (vllm_ar_n), row by row, on two H200s; and vLLM's stage 2
# alone (gather_t) at 2, 4 and 8 ranks' parts (h200x2-20261130dd-custom-ar-hypotheses.md). NVRTC's PTX of the
# kernels is kept beside the results.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_dd.sh
P=h200x2-20261130dd
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
CUDA_VISIBLE_DEVICES=0 timeout -k 10 120 python $G/custom_ar.py --ptx $W/$P-kernels.ptx >> $W/$P-main.log 2>&1
custom_ar_step dd 0,1
