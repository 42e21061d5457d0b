#!/bin/bash
# Run cu (issue 17, P12): a ring slice's post in the engine, frozen before this lease
# (h200x2-20261130cu-predicted.txt, ring_post.py --frozen; checks in h200x2-20261130cu-post-hypotheses.md).
# Run ce's rows on a new lease (ring_emul_run_ce.sh): NCCL's graph rows on two H200s at its defaults (all-reduce,
# all-gather, reduce-scatter), the all-reduce at 12, 16 and 32 forced ring channels and with a 1 MiB and a 16 MiB
# NCCL_BUFFSIZE, 2 MiB-2 GiB.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_post_run_cu.sh
RUN=cu DAY=20261130 exec bash "$(dirname "$0")/ring_emul_run_ce.sh"
