#!/bin/bash
# Run ct (issue 17, P12): what a ring slice's post (fence and flag stores) costs, by the slice's bytes, in NCCL's
# ring protocol alone (ring_emul.py, clusters of 4, its three two-rank ops, every row's stamps with the slices'
# flag waits, posts and bytes), at 4 and 24 channels, 1-96 MiB (slices of 10 KiB to 1 MiB).
# Hypotheses: h200x2-20261130ct-post-hypotheses.md, committed before the run; ring_post.py --verdict.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_post_run_ct.sh
export PYTHONUNBUFFERED=1
P=h200x2-20261130ct
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run ct: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch, cupy; print(torch.__version__, torch.version.cuda, torch.cuda.device_count(), cupy.__version__)"
} > $W/$P-env.txt 2>&1
pack
log "start emul"
timeout -k 10 300 python $G/ring_emul.py --variants cl4 --ops all_reduce,reduce_scatter,all_gather --channels 4,24 \
  --sizes 1,2,4,8,16,32,64,96 --stamp-all --out $W/$P-emul.csv --stamps $W/$P-emul-stamps.csv.gz > $W/$P-emul-run.log 2>&1
log "end emul rc=$? rows=$(( $(wc -l < $W/$P-emul.csv) - 1 ))"
log "done"; pack
