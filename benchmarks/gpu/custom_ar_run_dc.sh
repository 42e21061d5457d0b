#!/bin/bash
# Run dc (issue 17, P12): the two-stage custom all-reduce's release barrier as a flat fence,
# on two H200s, frozen before this lease (h200x2-20261130dc-custom-ar-hypotheses.md; h200x2-20261130dc-predicted.txt
# from custom_ar.py --frozen dc). custom_ar.py --run dc: the probes, then the two-stage kernel with nothing to sum
# at 3, 12 and 48 blocks, and vLLM's two-stage kernel at 1-36 blocks through 3 KiB-6 MiB (never measured).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_dc.sh
P=h200x2-20261130dc
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step dc 0,1
