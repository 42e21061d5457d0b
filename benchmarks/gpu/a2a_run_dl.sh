#!/bin/bash
# Run dl (issue 17, P12): the all-to-all's p2p LL channels, frozen before this lease (a2a_ll.py --frozen-dl;
# h200x2-20261130dl-predicted.txt; checks in h200x2-20261130dl-a2a-ll-hypotheses.md). collectives.py on two
# H200s, graph rows: the all-to-all at NCCL's defaults, at sizes never measured (parts 3-384 KiB, LL).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_dl.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261130dl ;; *) P=h100x2-20261130dl ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run dl: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
SIZES=6144,12288,24576,49152,98304,196608,393216,786432
file=$P-def
log "start $file sizes $SIZES"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout 150 torchrun --standalone --nproc_per_node 2 \
  $G/collectives.py --out $W/$file.csv --sizes $SIZES --ops all_to_all --modes graph --only collectives > $W/$file-run.log 2>&1
log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -h 'p2p channels per peer' $W/$file-run.log | head -1 | sed 's/.*INFO //')"
pack
log "done"; pack
