#!/bin/bash
# Run co (issue 17, P12): what a ring channel's primitive calls cost, registered before this lease
# (h200x2-20261130co-calls-hypotheses.md; `ring_calls.py --compare` reads the CSVs). collective_ramp_diag.py on
# two H200s, graph rows: the all-reduce, the all-gather out of place and in place, the reduce-scatter at NCCL's
# defaults (24 ring channels), then with the ring's channels forced to 8 and to 1, then the defaults again.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_run_co.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130co
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run co: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > $W/$P-env.txt 2>&1
pack
OPS=all_reduce,all_gather,all_gather_inplace,reduce_scatter
# variant : channels (empty: NCCL's default) : sizes (MiB) : the S / t guess that caps a graph's calls
for v in "def::2,4,8,16,32,64,128,256,1024:300" "ch8:8:4,16,64,256:150" "ch1:1:4,16,64:20" "def2::2,4,8,16,32,64,128,256,1024:300"; do
  IFS=: read -r name ch sizes gbps <<< "$v"
  envs=""; [ -n "$ch" ] && envs="NCCL_MIN_NCHANNELS=$ch NCCL_MAX_NCHANNELS=$ch"
  file=$P-$name
  log "start $file sizes $sizes"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 200 \
    torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py --out $W/$file.csv --variant $name \
    --ops $OPS --cases plain --sizes $sizes --est-gbps $gbps > $W/$file-run.log 2>&1
  log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -ohE '[0-9]+ coll channels' $W/$file-run.log | sort -u | tr '\n' ' ')"
  pack
done
log "done"; pack
