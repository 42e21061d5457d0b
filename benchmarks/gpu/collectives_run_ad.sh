#!/bin/bash
# Run ad (issue 17, P12, p12ramp2): the Simple ramp's diagnostics on two GPUs (collective_ramp_diag.py),
# one torchrun per NCCL environment: default (24 ring channels) with rotated buffers and idle gaps,
# ring channels 1, 4, 12, 8, 2 (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS), p2p channels 8 and 16.
# Usage on the device, from the repo root: OUT=<dir> [G=.gpudev] bash benchmarks/gpu/collectives_run_ad.sh
# Pre-registration: benchmarks/gpu/h100x2-20261128ad-ramp-hypotheses.md. The forced-channel steps' tuning logs
# were renamed -nccl-tuning-forced.txt after the run (collectives_channels.py --logs checks NCCL's default rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261128ad ;; *) P=h100x2-20261128ad ;; esac
W=/tmp/w; mkdir -p $W; G=${G:-benchmarks/gpu}; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
left() { echo $(( ${BUDGET:-420} - ($(date +%s) - T0) )); }
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
log "run ad: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
D=$G/collective_ramp_diag.py
# 1. default NCCL (24 ring channels): four ops, 2 MiB-1 GiB; rotated buffers and idle gaps up to 256 MiB (H2, H3)
step ch24 110 "" --cases plain,rot,gap10,gap1000 --case-max 256
# 2. one ring channel (H1, H3): all-reduce and all-gather 1 MiB-1 GiB, 1 ms gaps to 64 MiB
step ch1 80 "NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1" --ops all_reduce,all_gather --sizes 1,2,4,8,16,32,64,128,256,512,1024 --cases plain,gap1000 --case-max 64 --est-gbps 15
# 3. channels between (H1 against H3: where the ramp ends, in bytes or in time)
step ch4 50 "NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4" --ops all_reduce --est-gbps 60
step ch12 45 "NCCL_MIN_NCHANNELS=12 NCCL_MAX_NCHANNELS=12" --ops all_reduce --est-gbps 170
# 4. the all-to-all's p2p channels (8 and 16 p2p channels; 32, the default, is step 1)
step p2p8 40 "NCCL_MIN_P2P_NCHANNELS=8 NCCL_MAX_P2P_NCHANNELS=8" --ops all_to_all --sizes 64,128,256,512,1024 --est-gbps 150
step p2p16 40 "NCCL_MIN_P2P_NCHANNELS=16 NCCL_MAX_P2P_NCHANNELS=16" --ops all_to_all --sizes 64,128,256,512,1024 --est-gbps 200
# 5. if time is left: 8 and 2 ring channels
step ch8 45 "NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8" --ops all_reduce --est-gbps 120
step ch2 45 "NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2" --ops all_reduce --est-gbps 30
log "done"; pack
