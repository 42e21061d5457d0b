#!/bin/bash
# Run cq (issue 17, P12): a ring channel's cost by op as channels are added, registered before this lease
# (h200x2-20261130cq-channels-hypotheses.md; `ring_calls.py --channels` reads the CSVs). collective_ramp_diag.py on
# two H200s, graph rows of the all-reduce, the all-gather out of place and in place and the reduce-scatter with
# NCCL's ring channels forced to 1, 2, 4, 8, 12 and 16, then at NCCL's default (24).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_run_cq.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130cq
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cq: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > $W/$P-env.txt 2>&1
pack
OPS=all_reduce,all_gather,all_gather_inplace,reduce_scatter
# variant : channels (empty: NCCL's default) : sizes (MiB) : the S / t guess that caps a graph's calls
for v in "ch1:1:16,64,256:20" "ch2:2:16,64,256:40" "ch4:4:16,64,256,1024:80" "ch8:8:16,64,256,1024:150" \
         "ch12:12:16,64,256,1024:220" "ch16:16:16,64,256,1024:280" "def::16,64,256,1024:300"; do
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
