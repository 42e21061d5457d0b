#!/bin/bash
# Run cr (issue 17, P12): the bends by op. NCCL's all-reduce, reduce-scatter and all-gather (graph rows of
# collective_ramp_diag.py) at its default channels (24) and forced to 16, and NCCL's ring protocol alone
# (ring_emul.py, clusters of 4, the same three ops, with stamps), 16-1024 MiB, on one lease.
# Hypotheses: h200x2-20261130cr-bends-hypotheses.md, committed before the run; ring_bends.py --verdict.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_emul_run_cr.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130cr
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cr: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch, cupy; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count(), cupy.__version__)"
} > $W/$P-env.txt 2>&1
pack
Z=16,32,64,128,256,512,1024
OPS=all_reduce,reduce_scatter,all_gather
log "start emul"
timeout -k 10 240 python $G/ring_emul.py --variants cl4 --ops $OPS --channels 16,24 --sizes $Z \
  --out $W/$P-emul.csv --stamps $W/$P-emul-stamps.csv.gz > $W/$P-emul-run.log 2>&1
log "end emul rc=$? rows=$(( $(wc -l < $W/$P-emul.csv) - 1 ))"
pack
for v in "def::300" "ch16:16:280"; do
  IFS=: read -r name ch gbps <<< "$v"
  envs=""; [ -n "$ch" ] && envs="NCCL_MIN_NCHANNELS=$ch NCCL_MAX_NCHANNELS=$ch"
  log "start nccl $name"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 200 \
    torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py --out $W/$P-$name.csv --variant $name \
    --ops $OPS --cases plain --sizes $Z --est-gbps $gbps > $W/$P-$name-run.log 2>&1
  log "end nccl $name rc=$? rows=$(( $(wc -l < $W/$P-$name.csv) - 1 )) $(grep -ohE '[0-9]+ coll channels' $W/$P-$name-run.log | sort -u | tr '\n' ' ')"
  pack
done
log "done"; pack
