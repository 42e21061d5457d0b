#!/bin/bash
# Run cx (issue 17, P12): vLLM's custom all-reduce on two H200s with the host ahead, registered before this lease
# (h200x2-20261130cx-custom-ar-hypotheses.md; the model: rdusim/hw/custom_all_reduce.py, rdusim/sim/custom_ar.py).
# Run cw's rows (custom_ar_run_cw.sh) on a new lease, each trial of custom_ar.py queued behind a sleep on both GPUs.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_cx.sh
RUN=cx exec bash "$(dirname "$0")/custom_ar_run_cw.sh"
