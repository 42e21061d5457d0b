#!/bin/bash
# Run dj (issue 17, P12): the p2p channels as a closed network at the link (P2pChannels.queue), frozen before this lease
# (h200x2-20261130dj-predicted.txt; checks in h200x2-20261130dj-a2a-hypotheses.md). collective_ramp_diag.py
# on two H200s, graph rows (case plain): the all-to-all and sendrecv at NCCL's defaults and at 64 and 256 KiB
# chunks (16 channels a peer), sendrecv at 8 and 32 channels a peer, all at sizes never measured on them.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_dj.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261130dj ;; *) P=h100x2-20261130dj ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run dj: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
# name : p2p channels (empty: NCCL's default) : chunk (empty: default) : ops : sizes in MiB of S (never measured)
for v in "def:::all_to_all,sendrecv:5,10,20,40,80,160,320,640" "c64::65536:all_to_all,sendrecv:6,12,24,48" \
         "c256::262144:all_to_all,sendrecv:10,40,160" "p2p16:16::sendrecv:20,80,320" "p2p64:64::sendrecv:20,80,320"; do
  IFS=: read -r name p2p chunk ops sizes <<< "$v"
  file=$P-$name-plain
  envs=""; [ -n "$p2p" ] && envs="NCCL_MIN_P2P_NCHANNELS=$p2p NCCL_MAX_P2P_NCHANNELS=$p2p"
  [ -n "$chunk" ] && envs="$envs NCCL_P2P_NVL_CHUNKSIZE=$chunk"
  log "start $file ops $ops sizes $sizes env [$envs]"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout 150 torchrun --standalone --nproc_per_node 2 \
    $G/collective_ramp_diag.py --out $W/$file.csv --variant $name --ops $ops --cases plain --sizes $sizes --est-gbps 150 \
    > $W/$file-run.log 2>&1
  log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -h 'p2p channels per peer\|Chunksize' $W/$file-run.log | head -2 | sed 's/.*INFO //' | tr '\n' ' ')"
  pack
done
log "done"; pack
