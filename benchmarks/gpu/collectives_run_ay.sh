#!/bin/bash
# Run ay (issue 17, P12): Llama TP decode steps (CUDA graph, FlashAttention forced) at points never measured,
# after the H200's split-KV fixed times (fa2fix): 8B TP4 and 70B TP4 on four H200s, 8B TP2 on GPUs 0-1.
# Frozen before the run: h200x4-20261128ay-tp4-predicted.txt (and, for comparison, the model before fa2fix).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_ay.sh
# Results: $OUT/results.tgz (repacked after every step): the collectives.py CSVs, their run logs, -env.txt, -main.log.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x4-20261128ay; W=/tmp/w; mkdir -p $W; G=benchmarks/gpu
D8=1x2048,1x16384,2x8192,4x8192,16x8192,1x32768
D70=1x16384,4x8192,16x4096
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m; python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())"
} > $W/$P-env.txt 2>&1
step() {  # step NAME NPROC DEVICES LIMIT ARGS...: one torchrun of collectives.py
  local name=$1 n=$2 dev=$3 lim=$4; shift 4
  echo "$(date -u +%T) start $name: $*" >> $W/$P-main.log
  CUDA_VISIBLE_DEVICES=$dev timeout -k 10 $lim torchrun --standalone --nproc_per_node $n $G/collectives.py \
    --out $W/$P-$name.csv "$@" > $W/$P-$name-run.log 2>&1
  echo "$(date -u +%T) end $name rc=$?" >> $W/$P-main.log
  tar czf $OUT/results.tgz -C $W .
}
step tp4 4 0,1,2,3 150 --only e2e --e2e decode --decode $D8
step tp4-70b 4 0,1,2,3 200 --only e2e --e2e decode --tp-model llama-3.1-70b --decode $D70
step tp2 2 0,1 120 --only e2e --e2e decode --decode $D8
