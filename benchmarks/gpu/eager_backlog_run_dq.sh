#!/bin/bash
# Run dq (issue 17 item 4, P12): an eager op's host cost by the GPU's backlog and the host's state, one H200
# (eager_backlog.py). Hypotheses: h200-20261201dq-backlog-hypotheses.md; eager_backlog.py --analyse.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/eager_backlog_run_dq.sh
export PYTHONUNBUFFERED=1
P=h200-20261201dq
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run dq: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l)"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv;
  lscpu; nproc; python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > $W/$P-env.txt 2>&1
log "start"
timeout -k 10 420 python $G/eager_backlog.py --out $W/$P-backlog.csv.gz --rows $W/$P-dispatch.csv > $W/$P-run.log 2>&1
log "end rc=$?"; pack
python $G/eager_backlog.py --analyse $W/$P-backlog.csv.gz --rows $W/$P-dispatch.csv --write $W/$P-backlog.txt \
  >> $W/$P-run.log 2>&1
log "analysed rc=$?"; pack
