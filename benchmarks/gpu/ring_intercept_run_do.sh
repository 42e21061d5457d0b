#!/bin/bash
# Run do (issue 17, P12): NCCL's ring Simple calls from 4 KiB to 64 MiB on two H200s, graph rows, the Simple protocol
# forced on the ring and NCCL's defaults. Hypotheses: h200x2-20261130do-simple-hypotheses.md; frozen:
# h200x2-20261130do-predicted.txt; ring_intercept.py --verdict-do.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_intercept_run_do.sh
P=h200x2-20261130do
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
Z=4096,65536,262144,1048576,2097152,4194304,8388608,16777216,33554432,67108864
ARGS="--only collectives --ops all_reduce,reduce_scatter,all_gather --modes graph --sizes $Z"
NCCL_PROTO=Simple NCCL_ALGO=Ring step simple 2 0,1 200 $ARGS
step default 2 0,1 200 $ARGS
