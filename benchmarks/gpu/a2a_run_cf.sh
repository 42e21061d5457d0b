#!/bin/bash
# Run cf (issue 17, P12): the all-to-all's p2p channels, frozen before this lease
# (h200x2-20261130cf-predicted.txt, a2a_turns.py --frozen; checks in h200x2-20261130cf-a2a-hypotheses.md).
# collective_ramp_diag.py on two H200s, eager rows (calls back to back between events): sendrecv (each
# rank its part to the other), send_oneway (rank 1 to rank 0) and the all-to-all at NCCL's defaults,
# one and 32 p2p channels a peer, NCCL's launch without clusters; then the same ops as graph rows.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_cf.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261130cf ;; *) P=h100x2-20261130cf ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cf: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
BIG=64,128,256,512,768,1024
# name:ops:sizes:est-gbps:cases:env
for v in "def:sendrecv,send_oneway,all_to_all:$BIG:350:eager:" \
         "p2p2:sendrecv,send_oneway:8,16,32:40:eager:NCCL_MIN_P2P_NCHANNELS=2 NCCL_MAX_P2P_NCHANNELS=2" \
         "p2p64:sendrecv,send_oneway:$BIG:350:eager:NCCL_MIN_P2P_NCHANNELS=64 NCCL_MAX_P2P_NCHANNELS=64" \
         "cga0:sendrecv,send_oneway,all_to_all:$BIG:350:eager:NCCL_CGA_CLUSTER_SIZE=0" \
         "def:all_to_all,sendrecv,send_oneway:$BIG:350:plain:"; do
  IFS=: read -r name ops sizes est cases envs <<< "$v"
  file=$P-$name-$cases
  log "start $file ops $ops env [$envs]"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout 150 torchrun --standalone --nproc_per_node 2 \
    $G/collective_ramp_diag.py --out $W/$file.csv --variant $name --ops $ops --cases $cases --sizes $sizes --est-gbps $est \
    > $W/$file-run.log 2>&1
  log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -h 'p2p channels per peer' $W/$file-run.log | head -1 | sed 's/.*INFO //')"
  grep -h "via P2P" $W/$file-run.log | sed 's/.*INFO //' | sort | uniq -c | head -8 >> $W/$P-main.log
  pack
done
log "done"; pack
