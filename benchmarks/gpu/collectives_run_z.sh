#!/bin/bash
# Run z (issue 17, P12): the launch constants on an H200 host (collective_micro) and a short 2-rank sweep.
# The device call ran copies under .gpudev/ (G=.gpudev; collectives.py as committed in 3ec8630).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261128z ;; *) P=h100x2-20261128z ;; esac
W=/tmp/w; mkdir -p $W; G=${G:-benchmarks/gpu}; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
log "run z: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
log "start micro"
CUDA_VISIBLE_DEVICES=0,1 timeout 90 torchrun --standalone --nproc_per_node 2 $G/collective_micro.py --out $OUT/cur.csv > $W/$P-micro.log 2>&1
log "end micro rc=$?"; mv $OUT/cur.csv $W/$P-micro.csv; pack
log "start v-sizes"
CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_DEBUG_FILE=$W/nccl.%h.%p timeout 90 \
  torchrun --standalone --nproc_per_node 2 $G/collectives.py --out $OUT/cur.csv --sizes v --modes graph,queued --only collectives > $W/$P-v-sizes-run.log 2>&1
log "end v-sizes rc=$? rows=$(( $(wc -l < $OUT/cur.csv) - 1 ))"; mv $OUT/cur.csv $W/$P-v-sizes.csv
cat $W/nccl.* | grep -o "NCCL INFO [A-Za-z]*: [0-9]* Bytes -> Algo.*" | sort | uniq -c | sort -k5,5n -k4,4 > $W/$P-v-sizes-nccl-tuning.txt
rm -f $W/nccl.*
log "done"; pack
