#!/bin/bash
# Run ar (issue 17, P12, a2a): the all-to-all's p2p chunk pipeline and channels a peer on two GPUs
# (collective_ramp_diag.py, graph rows), one torchrun per NCCL environment: default, NCCL_P2P_NVL_CHUNKSIZE
# 128 KiB, 1 MiB and 2 MiB, 64, 4 and 2 p2p channels, one and 16 ring channels (all-reduce), the default again.
# Usage on the device, from the repo root: OUT=<dir> [G=.gpudev] bash benchmarks/gpu/collectives_run_ar.sh
# Pre-registration: benchmarks/gpu/h200x2-20261128ar-a2a-hypotheses.md.
# The forced ring-channel steps' tuning logs (ch1, ring16) were renamed -nccl-tuning-forced.txt after the run
# (collectives_channels.py --logs checks NCCL's default rule on the others).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261128ar ;; *) P=h100x2-20261128ar ;; esac
W=/tmp/w; mkdir -p $W; G=${G:-benchmarks/gpu}; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
left() { echo $(( ${BUDGET:-465} - ($(date +%s) - T0) )); }
# step NAME LIMIT "ENV..." ARGS...: one torchrun of collective_ramp_diag.py with NCCL's init and tuning log
step() {
  local name=$1 lim=$2 envs=$3; shift 3
  local l=$(left); [ $l -lt 25 ] && { log "skip $name (${l}s left)"; return; }
  [ $lim -gt $l ] && lim=$l
  log "start $name (limit ${lim}s) env [$envs]: $*"
  rm -f $W/nccl.* $OUT/cur.csv
  env $envs CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_DEBUG_FILE=$W/nccl.%h.%p \
    timeout $lim torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py --out $OUT/cur.csv --variant $name "$@" \
    > $W/$P-$name-run.log 2>&1
  log "end $name rc=$? rows=$(( $(wc -l < $OUT/cur.csv) - 1 ))"
  mv $OUT/cur.csv $W/$P-$name.csv
  cat $W/nccl.* | grep -o "NCCL INFO [A-Za-z]*: [0-9]* Bytes -> Algo.*" | sort | uniq -c | sort -k5,5n -k4,4 \
    > $W/$P-$name-nccl-tuning.txt
  f0=$(grep -l "rank 0 nranks" $W/nccl.* | head -1)
  grep -v "Bytes -> Algo" ${f0:-/dev/null} | sed 's/^[^ ]* //' | head -400 > $W/$P-$name-nccl-init.txt
  rm -f $W/nccl.*
  pack
}
log "run ar: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
Z=4,16,64,128,256,512,768,1024
# 1. NCCL's defaults: the all-to-all (16 p2p channels a peer to 512 MiB, then 32) and the all-reduce
step default 90 "" --ops all_to_all,all_reduce --sizes $Z --est-gbps 500
# 2. p2p chunk 128 KiB: parts double past 32 chunks = 4 MiB, so 32 channels a peer from 256 MiB
step chunk128k 55 "NCCL_P2P_NVL_CHUNKSIZE=131072" --ops all_to_all --sizes $Z --est-gbps 500
# 3. p2p chunk 2 MiB: 16 channels a peer at every size to 1 GiB
step chunk2m 55 "NCCL_P2P_NVL_CHUNKSIZE=2097152" --ops all_to_all --sizes $Z --est-gbps 450
# 4. 64 p2p channels: self and peer each on their own 32
step p2p64 55 "NCCL_MIN_P2P_NCHANNELS=64 NCCL_MAX_P2P_NCHANNELS=64" --ops all_to_all --sizes $Z --est-gbps 500
# 5. one p2p channel a peer (2 p2p channels: nChannelsMin 1; parts double past 16 MiB): a channel's rate and its fill
step p2p2 50 "NCCL_MIN_P2P_NCHANNELS=2 NCCL_MAX_P2P_NCHANNELS=2" --ops all_to_all --sizes 1,2,4,8,16,32 --est-gbps 40
# 6. one ring channel: the all-reduce's rate on one CTA (run ad: 21.0 GB/s on the H100)
step ch1 45 "NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1" --ops all_reduce --sizes 4,16,64 --est-gbps 20
# 7. p2p chunk 1 MiB: 16 channels a peer at every size to 1 GiB, half chunk2m's fill
step chunk1m 50 "NCCL_P2P_NVL_CHUNKSIZE=1048576" --ops all_to_all --sizes $Z --est-gbps 450
# 8. two p2p channels a peer (4 p2p channels)
step p2p4 45 "NCCL_MIN_P2P_NCHANNELS=4 NCCL_MAX_P2P_NCHANNELS=4" --ops all_to_all --sizes 1,2,4,8,16,32 --est-gbps 80
# 9. 16 ring channels: the all-reduce's rate at the all-to-all's channel count
step ring16 50 "NCCL_MIN_NCHANNELS=16 NCCL_MAX_NCHANNELS=16" --ops all_reduce --sizes $Z --est-gbps 250
# 10. the defaults again (drift), if time is left
step default2 50 "" --ops all_to_all --sizes $Z --est-gbps 500
log "done"; pack
