#!/bin/bash
# Run db (issue 17, P12): what a pass of vLLM's custom all-reduce costs by the loads a thread keeps in flight,
# on two H200s, frozen before this lease (h200x2-20261130db-custom-ar-hypotheses.md; h200x2-20261130db-predicted.txt
# from custom_ar.py --frozen db). custom_ar.py --run db: the probes, then pass_probe (vLLM's one-stage loop, no
# barriers) on both GPUs at once at 1-7 loads from the peer, 2-36 blocks,
# 192-512 threads (points run da never ran), two pass counts each.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/custom_ar_run_db.sh
P=h200x2-20261130db
source benchmarks/gpu/collectives_steps.sh  # env, $W, $G, custom_ar_step()
custom_ar_step db 0,1
