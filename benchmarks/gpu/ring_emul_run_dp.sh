#!/bin/bash
# Run dp (issue 17, P12): the emulated ring protocol (ring_emul.py) on two H200s launched directly and replayed from
# CUDA graphs (--graphs), run dn's two-rank rows. Hypotheses: h200x2-20261130dp-graphs-hypotheses.md;
# ring_emul.py --verdict-dp. Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_emul_run_dp.sh
export PYTHONUNBUFFERED=1
P=h200x2-20261130dp
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run dp: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l)"
{ date -u; nvidia-smi topo -m; python -c "import cupy; print(cupy.__version__)"; } > $W/$P-env.txt 2>&1
ROWS="--ranks 2 --variants cl4,cl4w --ops all_reduce,reduce_scatter,all_gather --channels 24 --sizes 2,4,8,16,32,64,128"
log "start direct"
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 200 python $G/ring_emul.py $ROWS --out $W/$P-direct.csv > $W/$P-direct-run.log 2>&1
log "end direct rc=$?"; pack
log "start graphs"
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 200 python $G/ring_emul.py $ROWS --graphs --stamp-all --out $W/$P-graphs.csv \
  --stamps $W/$P-graphs-stamps.csv.gz > $W/$P-graphs-run.log 2>&1
log "end graphs rc=$? $(grep -c 'launch=graph' $W/$P-graphs.csv) rows replayed from graphs"
log "done"; pack
