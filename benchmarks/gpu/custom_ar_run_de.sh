#!/bin/bash
# Run de (issue 17, P12): vLLM's compiled form throughout, frozen: its loop's pass by the loads a thread keeps in
# flight (pass_t<2-8>) against run db's form as adopted, and vllm_ar_t<2> with run dc's flat fence, on two H200s
# (h200x2-20261130de-custom-ar-hypotheses.md; h200x2-20261130de-predicted.txt from custom_ar.py --frozen de).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_de.sh
P=h200x2-20261130de
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step de 0,1
