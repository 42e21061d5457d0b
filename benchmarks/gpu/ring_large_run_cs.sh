#!/bin/bash
# Run cs (issue 17, P12): past 1 GiB, do a ring's channels fill the link? NCCL's all-reduce, reduce-scatter
# and all-gather (graph rows of collective_ramp_diag.py) at its default channels (24) and forced to 16, and
# NCCL's ring protocol alone (ring_emul.py, clusters of 4, the same three ops, with stamps), 256-4096 MiB, on
# one lease; NCCL's default channels again at the end (the lease's drift).
# Hypotheses: h200x2-20261130cs-large-hypotheses.md, committed before the run; ring_large.py --verdict.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_large_run_cs.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130cs
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cs: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch, cupy; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count(), cupy.__version__)"
} > $W/$P-env.txt 2>&1
pack
Z=256,512,1024,2048,3072,4096
OPS=all_reduce,reduce_scatter,all_gather
nccl() {  # name, forced channels (empty: NCCL's own), a guess of S / t (GB/s)
  local envs=""; [ -n "$2" ] && envs="NCCL_MIN_NCHANNELS=$2 NCCL_MAX_NCHANNELS=$2"
  log "start nccl $1"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 200 \
    torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py --out $W/$P-$1.csv --variant ${1%2} \
    --ops $OPS --cases plain --sizes $Z --est-gbps $3 > $W/$P-$1-run.log 2>&1
  log "end nccl $1 rc=$? rows=$(( $(wc -l < $W/$P-$1.csv) - 1 )) $(grep -ohE '[0-9]+ coll channels' $W/$P-$1-run.log | sort -u | tr '\n' ' ')"
  pack
}
nccl def "" 300
nccl ch16 16 280
log "start emul"
timeout -k 10 240 python $G/ring_emul.py --variants cl4 --ops $OPS --channels 16,24 --sizes $Z \
  --out $W/$P-emul.csv --stamps $W/$P-emul-stamps.csv.gz > $W/$P-emul-run.log 2>&1
log "end emul rc=$? rows=$(( $(wc -l < $W/$P-emul.csv) - 1 ))"
pack
nccl def2 "" 300
log "done"; pack
