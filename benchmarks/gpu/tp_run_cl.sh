#!/bin/bash
# Run cl (issue 17, P12): where an eager TP2 prefill step's host time goes, call by call (tp_host.py), registered
# before this lease (h200x2-20261130cl-tp-host-hypotheses.md; `tp_host.py --analyse` reads the CSVs): Llama-3.1-8B
# TP2 prefill of 1K, 2K and 4K tokens as collectives.py runs it (tp), without its all-reduces (noar), and its
# shard on one GPU without a process group (single).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/tp_run_cl.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130cl
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cl: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz"
} > $W/$P-env.txt 2>&1
pack
log "start tp2"
CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 240 torchrun --standalone --nproc_per_node 2 $G/tp_host.py --out $W/$P-tp2.csv \
  > $W/$P-tp2-run.log 2>&1
log "end tp2 rc=$? rows=$(( $(wc -l < $W/$P-tp2.csv) - 1 ))"; pack
log "start single"
CUDA_VISIBLE_DEVICES=0 timeout -k 10 180 python $G/tp_host.py --single --world 2 --out $W/$P-single.csv \
  > $W/$P-single-run.log 2>&1
log "end single rc=$? rows=$(( $(wc -l < $W/$P-single.csv) - 1 ))"; pack
log "done"; pack
