#!/bin/bash
# Run cn (issue 17, P12): run cm again with its two GPU states alternating trial by trial (tp_host.py --alternate),
# registered before this lease (h200x2-20261130cn-host-state-hypotheses.md; `tp_host.py --analyse --verdict-cm`):
# Llama-3.1-8B TP2 prefill of 1K and 4K tokens (tp, noar), its TP2 shard and its TP8 shard on one GPU (single), each
# as collectives.py times it (the GPU waiting on the host where the host is slower) and with the GPU behind
# (--ahead-ms 60: a GPU sleep before the step, so every call of it is made with the GPU busy), the two alternating.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/tp_run_cn.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130cn
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cn: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz"
} > $W/$P-env.txt 2>&1
pack
log "start tp2"
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 200 torchrun --standalone --nproc_per_node 2 $G/tp_host.py --lengths 1024,4096 \
  --ahead-ms 60 --alternate --out $W/$P-tp2.csv > $W/$P-tp2-run.log 2>&1
log "end tp2 rc=$? rows=$(( $(wc -l < $W/$P-tp2.csv) - 1 ))"; pack
for world in 2 8; do
  log "start single$world"
  CUDA_VISIBLE_DEVICES=0 timeout -k 10 150 python $G/tp_host.py --single --world $world --lengths 1024,4096 \
    --ahead-ms 60 --alternate --out $W/$P-single$world.csv > $W/$P-single$world-run.log 2>&1
  log "end single$world rc=$? rows=$(( $(wc -l < $W/$P-single$world.csv) - 1 ))"; pack
done
log "done"; pack
