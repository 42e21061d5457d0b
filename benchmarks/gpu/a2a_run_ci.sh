#!/bin/bash
# Run ci (issue 17, P12): the p2p pipeline candidate (a2a_pipeline.py), frozen before this lease
# (h200x2-20261130ci-predicted.txt; checks in h200x2-20261130ci-a2a-hypotheses.md). collective_ramp_diag.py
# on two H200s, graph rows (case plain): the all-to-all and sendrecv at NCCL's defaults, sendrecv at 4 and 8
# p2p channels a peer, all at sizes never measured on those variants.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_ci.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261130ci ;; *) P=h100x2-20261130ci ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run ci: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
# name : p2p channels (empty: NCCL's default) : ops : sizes in MiB of S (never measured on these variants)
for v in "def::all_to_all,sendrecv:3,6,12,24,48,96,192,384" "p2p8:8:sendrecv:24,48,96" "p2p16:16:sendrecv:48,96,192"; do
  IFS=: read -r name p2p ops sizes <<< "$v"
  file=$P-$name-plain
  envs=""; [ -n "$p2p" ] && envs="NCCL_MIN_P2P_NCHANNELS=$p2p NCCL_MAX_P2P_NCHANNELS=$p2p"
  log "start $file ops $ops sizes $sizes env [$envs]"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout 150 torchrun --standalone --nproc_per_node 2 \
    $G/collective_ramp_diag.py --out $W/$file.csv --variant $name --ops $ops --cases plain --sizes $sizes --est-gbps 150 \
    > $W/$file-run.log 2>&1
  log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -h 'p2p channels per peer' $W/$file-run.log | head -1 | sed 's/.*INFO //')"
  pack
done
log "done"; pack
