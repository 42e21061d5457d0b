#!/bin/bash
# Run dr (issue 17 item 4, P12): the eager host adopted after run dq, checked frozen on a new H200 lease: sweep.py's
# paired eager steps (each step predicted from its own site pass) and run dq's microbenchmark again.
# Hypotheses: h200-20261201dr-eager-hypotheses.md. Usage on the device, from the repo root:
# OUT=<dir> bash benchmarks/gpu/eager_run_dr.sh
export PYTHONUNBUFFERED=1
P=h200-20261201dr
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run dr: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l)"
log "start paired"
timeout -k 10 360 python $G/sweep.py --out $W/$P-sweep.csv --kernels $W/$P-kernels.csv --env $W/$P-env.txt \
  --only eager_paired,p10_paired > $W/$P-sweep-run.log 2>&1
log "end paired rc=$? $(grep -c eager_paired $W/$P-sweep.csv) steps"; pack
timeout -k 10 200 python $G/eager_backlog.py --out $W/$P-backlog.csv.gz --rows $W/$P-dispatch.csv > $W/$P-backlog-run.log 2>&1
log "end backlog rc=$?"
python $G/eager_backlog.py --analyse $W/$P-backlog.csv.gz --rows $W/$P-dispatch.csv --write $W/$P-backlog.txt \
  >> $W/$P-backlog-run.log 2>&1
log "analysed rc=$?"; pack
