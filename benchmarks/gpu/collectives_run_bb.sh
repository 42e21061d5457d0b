#!/bin/bash
# Run bb (issue 17, P12): every collective call timed alone (collective_percall.py), default channels on two and
# four GPUs, 8 and 12 ring channels on two, and all-reduce graph rows to 4 GiB (collective_ramp_diag.py).
# Usage on a 4-GPU device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_bb.sh
# Pre-registration: benchmarks/gpu/h200x4-20261128bb-percall-hypotheses.md.
P=h200x4-20261128bb
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > $W/$P-env.txt 2>&1
# pc NAME NPROC DEVICES LIMIT "ENV..." ARGS...: one torchrun of collective_percall.py
pc() {
  local name=$1 n=$2 dev=$3 lim=$4 envs=$5; shift 5
  log "start $name [$envs] $*"
  env $envs CUDA_VISIBLE_DEVICES=$dev timeout -k 10 $lim torchrun --standalone --nproc_per_node $n \
    $G/collective_percall.py --out $W/$P-$name.csv --variant $name "$@" > $W/$P-$name-run.log 2>&1
  log "end $name rc=$?"; gzip -f $W/$P-$name.csv; pack
}
ALL=all_reduce,all_gather,reduce_scatter,all_to_all
pc x2 2 0,1 110 "" --ops $ALL
pc x2ch8 2 0,1 60 "NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8" --ops all_reduce
pc x4 4 0,1,2,3 110 "" --ops $ALL
pc x2ch12 2 0,1 60 "NCCL_MIN_NCHANNELS=12 NCCL_MAX_NCHANNELS=12" --ops all_reduce
log "start graph"
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 90 torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py \
  --out $W/$P-graph.csv --variant x2 --ops all_reduce --sizes 16,32,64,128,256,384,512,768,1024,2048,4096 \
  --est-gbps 330 --reps 11 > $W/$P-graph-run.log 2>&1
log "end graph rc=$?"; pack
pc x2b 2 2,3 60 "" --ops all_reduce
log "done"; pack
