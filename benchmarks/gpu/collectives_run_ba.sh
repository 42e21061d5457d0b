#!/bin/bash
# Run ba (issue 17, P12): Llama TP decode steps (CUDA graph, FlashAttention forced) at points never measured,
# after RMSNorm's weight from DRAM (coldnorm): 8B and 70B at TP4 on four H200s, then at TP2 on GPUs 0-1.
# Frozen before the run: h200x4-20261128ba-predicted.txt.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/collectives_run_ba.sh
# Results: $OUT/results.tgz (repacked after every step): the collectives.py CSVs, their run logs, -env.txt, -main.log.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x4-20261128ba; W=/tmp/w; mkdir -p $W; G=benchmarks/gpu
D8=2x4096,6x8192,12x8192,24x4096
D70=2x8192,8x16384,12x4096
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
step tp4 4 0,1,2,3 120 --only e2e --e2e decode --decode $D8
step tp4-70b 4 0,1,2,3 150 --only e2e --e2e decode --tp-model llama-3.1-70b --decode $D70
step tp2 2 0,1 100 --only e2e --e2e decode --decode $D8
step tp2-70b 2 0,1 150 --only e2e --e2e decode --tp-model llama-3.1-70b --decode $D70
