#!/bin/bash
# Run an (issue 17, P12): four H200s of one host. Frozen: h200x4-20261128an-collectives-predicted.txt.
# Usage on the device, from the repo root: OUT=<dir> G=.gpudev bash .gpudev/collectives_run_an.sh
# Results: $OUT/results.tgz (repacked after every step), $OUT/main.log, and the step in flight's CSV ($OUT/cur.csv).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
N=$(nvidia-smi -L | wc -l); P=${PREFIX:-h200x$([ $N -lt 4 ] && echo 2 || echo 4)-20261128an}
W=/tmp/w; mkdir -p $W
G=${G:-benchmarks/gpu}  # the device call runs copies under .gpudev/ (G=.gpudev)
T0=$(date +%s)
D70=1x1024,1x8192,8x4096,32x4096,64x2048,128x1024,256x1024
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
left() { echo $(( ${BUDGET:-540} - ($(date +%s) - T0) )); }
# step NAME NPROC DEVICES LIMIT ARGS...: a torchrun of collectives.py with NCCL's tuning log
step() {
  local name=$1 n=$2 dev=$3 lim=$4; shift 4
  local l=$(left); [ $l -lt 20 ] && { log "skip $name (${l}s left)"; return; }
  [ $lim -gt $l ] && lim=$l
  log "start $name ($n ranks, GPUs $dev, limit ${lim}s): $*"
  rm -f $W/nccl.* $OUT/cur.csv
  CUDA_VISIBLE_DEVICES=$dev NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_DEBUG_FILE=$W/nccl.%h.%p \
    timeout -k 10 $lim torchrun --standalone --nproc_per_node $n $G/collectives.py --out $OUT/cur.csv "$@" \
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
micro() {
  local l=$(left); [ $l -lt 30 ] && { log "skip micro (${l}s left)"; return; }
  log "start micro (4 ranks)"
  CUDA_VISIBLE_DEVICES=0,1,2,3 timeout -k 10 $(( l < 60 ? l - 5 : 60 )) torchrun --standalone --nproc_per_node 4 \
    $G/collective_micro.py --out $OUT/cur.csv > $W/$P-micro.log 2>&1
  log "end micro rc=$?"
  mv $OUT/cur.csv $W/$P-micro.csv
  pack
}
log "run an: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  nvidia-smi nvlink -s -i 0
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; free -g | head -2; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
nvidia-smi -q > $W/$P-nvidia-smi-q.txt 2>&1
pack
if [ "$(nvidia-smi -L | wc -l)" -lt 4 ]; then  # the fallback (four H200s not lent): two ranks, 70B at TP2
  step x2-sweep 2 0,1 80 --only collectives --modes stream,graph,queued
  step tp2 2 0,1 90 --only e2e
  step tp2-70b 2 0,1 150 --only e2e --tp-model llama-3.1-70b --decode ${D70%,256x1024} --prefill 1024,4096
  log "start micro (2 ranks)"
  CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 50 torchrun --standalone --nproc_per_node 2 $G/collective_micro.py \
    --out $OUT/cur.csv > $W/$P-micro.log 2>&1
  log "end micro rc=$?"; mv $OUT/cur.csv $W/$P-micro.csv; pack
  step x2-sweep2 2 0,1 80 --only collectives --modes stream,graph,queued
  log "done"; pack; exit 0
fi
# 1. four ranks: the sweep 1 KiB-1 GiB, every op, stream, graph and queued (host ahead)
step sweep 4 0,1,2,3 120 --only collectives --modes stream,graph,queued
# 2. TP4 Llama-3.1-8B: decode (graph) at the six default points, prefill (eager) 1K, 4K, 16K
step tp4 4 0,1,2,3 90 --only e2e
# 3. TP4 Llama-3.1-70B (35 GB of bf16 weights a GPU): decode (graph) at seven points, prefill 1K, 4K
step tp4-70b 4 0,1,2,3 150 --only e2e --tp-model llama-3.1-70b --decode $D70 --prefill 1024,4096
# 4. host constants at 4 ranks (no NCCL debug log)
micro
# 5. two ranks on GPUs 0-1 of the same host: the sweep, stream, graph and queued (run aa's lease to lease)
step x2-sweep 2 0,1 80 --only collectives --modes stream,graph,queued
# 6. time left: the 4-rank sweep again (lease noise within one lease)
step sweep2 4 0,1,2,3 100 --only collectives --modes stream,graph,queued
log "done"; pack
