#!/bin/bash
# Run y (issue 17, P12): frozen check of the ring LL latency fit on 4 H100s (2/3-rank subsets on the same host).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_y.sh
# Results: $OUT/results.tgz (repacked after every step), $OUT/main.log, and the step in flight's CSV ($OUT/cur.csv).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=${PREFIX:-h100x4-20261128y}
W=/tmp/w; mkdir -p $W
G=${G:-benchmarks/gpu}  # the device call ran copies under .gpudev/ (G=.gpudev)
T0=$(date +%s)
DECODE=2x2048,4x16384,16x2048,48x4096,96x1024,256x512
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
left() { echo $(( ${BUDGET:-330} - ($(date +%s) - T0) )); }
# step NAME NPROC DEVICES LIMIT ARGS...: a torchrun of collectives.py with NCCL's tuning log
step() {
  local name=$1 n=$2 dev=$3 lim=$4; shift 4
  local l=$(left); [ $l -lt 20 ] && { log "skip $name (${l}s left)"; return; }
  [ $lim -gt $l ] && lim=$l
  log "start $name ($n ranks, GPUs $dev, limit ${lim}s): $*"
  rm -f $W/nccl.* $OUT/cur.csv
  CUDA_VISIBLE_DEVICES=$dev NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=${SUBSYS:-INIT,TUNING} NCCL_DEBUG_FILE=$W/nccl.%h.%p \
    timeout $lim torchrun --standalone --nproc_per_node $n $G/collectives.py --out $OUT/cur.csv "$@" \
    > $W/$P-$name-run.log 2>&1
  log "end $name rc=$? rows=$(( $(wc -l < $OUT/cur.csv) - 1 ))"
  mv $OUT/cur.csv $W/$P-$name.csv
  cat $W/nccl.* | grep -o "NCCL INFO [A-Za-z]*: [0-9]* Bytes -> Algo.*" | sort | uniq -c | sort -k5,5n -k4,4 \
    > $W/$P-$name-nccl-tuning.txt
  f0=$(grep -l "rank 0 nranks" $W/nccl.* | head -1)
  grep -v "Bytes -> Algo" ${f0:-/dev/null} | sed 's/^[^ ]* //' | head -${INITLINES:-400} > $W/$P-$name-nccl-init.txt
  rm -f $W/nccl.*
  pack
}
log "run y: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
# 1. four ranks: run y's sizes, every op, stream, graph and queued (host ahead)
step y4 4 0,1,2,3 120 --sizes y --modes stream,graph,queued --only collectives
# 2. three and two ranks: the small sizes, graph and queued
step y3 3 0,1,2 50 --sizes ys --modes graph,queued --only collectives
step y2 2 0,1 50 --sizes ys --modes graph,queued --only collectives
# 3. TP4 Llama-3.1-8B: decode steps (graph) at new batch/KV points, prefill (eager) 1K, 4K, 16K
step tp4 4 0,1,2,3 100 --only e2e --e2e decode,prefill --decode $DECODE
# 4. three ranks: all-gather / all-to-all / reduce-scatter at 12, 48 MiB (slices 16-byte multiples) and
#    16, 64 MiB (run w's, slices not), with NCCL's channels (INIT, TUNING, P2P logs)
SUBSYS=INIT,TUNING,P2P INITLINES=3000 step y3align 3 0,1,2 50 --sizes y3 --ops all_gather,all_to_all,reduce_scatter --modes graph --only collectives
# 5. host constants on this host (no NCCL debug log), if time is left
if [ $(left) -gt 30 ]; then
  log "start micro"
  CUDA_VISIBLE_DEVICES=0,1,2,3 timeout $(( $(left) - 5 )) torchrun --standalone --nproc_per_node 4 $G/collective_micro.py \
    --out $OUT/cur.csv > $W/$P-micro.log 2>&1
  log "end micro rc=$?"
  mv $OUT/cur.csv $W/$P-micro.csv
fi
log "done"; pack
