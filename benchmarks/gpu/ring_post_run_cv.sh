#!/bin/bash
# Run cv (issue 17, P12): a ring slice's post growing with the channels (run ct's line) in the engine, frozen
# before this lease (h200x2-20261130cv-predicted.txt, ring_post.py --run cv --frozen; checks in
# h200x2-20261130cv-post-hypotheses.md). Run ce's rows on a new lease (ring_emul_run_ce.sh).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_post_run_cv.sh
RUN=cv DAY=20261130 exec bash "$(dirname "$0")/ring_emul_run_ce.sh"
