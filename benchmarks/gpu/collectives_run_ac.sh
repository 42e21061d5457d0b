#!/bin/bash
# Run ac (issue 17, P12; ran from .gpudev/run_ac.sh, copied here): two H200s, Llama-3.1-8B TP2 steps with FlashAttention forced (collectives.py
# since run ab): run aa's decode and prefill rows twice, and four new decode points.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261128ac ;; *) P=h100x2-20261128ac ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
step() {
  local name=$1 lim=$2; shift 2
  log "start $name: $*"
  CUDA_VISIBLE_DEVICES=0,1 timeout $lim torchrun --standalone --nproc_per_node 2 $G/collectives.py --out $OUT/cur.csv "$@" \
    > $W/$P-$name-run.log 2>&1
  log "end $name rc=$? rows=$(( $(wc -l < $OUT/cur.csv) - 1 ))"
  mv $OUT/cur.csv $W/$P-$name.csv
  pack
}
log "run ac: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > $W/$P-topo-env.txt 2>&1
pack
step tp2 110 --only e2e
step tp2new 80 --only e2e --e2e decode --decode 16x2048,48x4096,96x1024,256x512
step tp2rep 110 --only e2e
log "done"; pack
