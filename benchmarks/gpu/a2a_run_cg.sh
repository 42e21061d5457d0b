#!/bin/bash
# Run cg (issue 17, P12): a fixed cost a chunk in a p2p channel's turns (a2a_step_cost.py; checks in
# h200x2-20261130cg-a2a-hypotheses.md). collective_ramp_diag.py graph rows on two H200s: one channel a peer at
# 128 / 256 / 512 KiB chunks (the calibration), NCCL's p2p channels at those chunks (the predictions).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_cg.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261130cg ;; *) P=h100x2-20261130cg ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cg: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
ONE="NCCL_MIN_P2P_NCHANNELS=2 NCCL_MAX_P2P_NCHANNELS=2"
# name:ops:sizes:est-gbps:env
for v in "c512:sendrecv,send_oneway:2,4,8:30:$ONE" \
         "c256:sendrecv,send_oneway:2,4,8:30:$ONE NCCL_P2P_NVL_CHUNKSIZE=262144" \
         "c128:sendrecv,send_oneway:2,4,8:30:$ONE NCCL_P2P_NVL_CHUNKSIZE=131072" \
         "d128:sendrecv,all_to_all:16,32,64,128:300:NCCL_P2P_NVL_CHUNKSIZE=131072" \
         "d256:sendrecv,all_to_all:16,32,64,128,256:300:NCCL_P2P_NVL_CHUNKSIZE=262144" \
         "d512:sendrecv,all_to_all:48,96,192,384:300:"; do
  IFS=: read -r name ops sizes est envs <<< "$v"
  file=$P-$name
  log "start $file ops $ops env [$envs]"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout 120 torchrun --standalone --nproc_per_node 2 \
    $G/collective_ramp_diag.py --out $W/$file.csv --variant $name --ops $ops --cases plain --sizes $sizes --est-gbps $est \
    > $W/$file-run.log 2>&1
  log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -h 'p2p channels per peer' $W/$file-run.log | head -1 | sed 's/.*INFO //') $(grep -h 'P2P Chunksize' $W/$file-run.log | head -1 | sed 's/.*INFO //')"
  pack
done
log "done"; pack
