#!/bin/bash
# Run cw (issue 17, P12): vLLM's custom all-reduce on two H200s, registered before this lease
# (h200x2-20261130cw-custom-ar-hypotheses.md; the model: rdusim/hw/custom_all_reduce.py, rdusim/sim/custom_ar.py).
# custom_ar.py: the probes (a pointer chase through the peer's memory, a flag ping-pong), vLLM's one- and
# two-stage kernels emulated at 1 KiB-64 MiB, the block sweep, the empty kernel; then NCCL's all-reduce at the
# same sizes on the same lease (collectives.py, graph and queued), for the two side by side.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_cw.sh
# (RUN=cx: the same rows for run cx, custom_ar_run_cx.sh; custom_ar.py queues every trial behind a sleep since)
P=h200x2-20261130${RUN:-cw}
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, step()
echo "$(date -u +%T) start custom_ar" >> $W/$P-main.log
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 240 python $G/custom_ar.py --out $W/$P-custom-ar.csv > $W/$P-custom-ar-run.log 2>&1
echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
tar czf $OUT/results.tgz -C $W .
Z=1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864
step nccl 2 0,1 240 --only collectives --ops all_reduce --modes graph,queued --sizes $Z
