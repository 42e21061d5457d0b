#!/bin/bash
# Run dm (issue 17, P12): the all-to-all on four H200s at sizes never measured, frozen before the lease on the model
# after runs dj and dk-dl (h200x4-20261130dm-a2a-hypotheses.md; h200x4-20261130dm-predicted.txt from
# collectives.py --model hw_configs/h200.yaml --sizes ... --ranks 4). Needs a lease of nvidia-h200-x4.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_dm.sh
P=h200x4-20261130dm
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
step a2a 4 0,1,2,3 240 --sizes 6144,24576,98304,393216,3145728,12582912,50331648,201326592,805306368 \
  --ops all_to_all --modes graph --only collectives
