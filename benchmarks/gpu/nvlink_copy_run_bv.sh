#!/bin/bash
# Run bv (issue 17, P12): the Simple ramp without NCCL. nvlink_copy.py (plain SM copies over NVLink,
# 1-64 CTAs, bidirectional, one way and local), then on the same lease NCCL's own all-reduce (graph
# rows of collective_ramp_diag.py) at its default 24 channels and at 8, the comparison the
# hypotheses need (h200x2-20261129bv-ramp-hypotheses.md, committed before the run).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/nvlink_copy_run_bv.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261129bv ;; *) P=h100x2-20261129bv ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
log "run bv: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch, cupy; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count(), cupy.__version__)"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
log "start copy"
timeout 240 python $G/nvlink_copy.py --out $W/$P-copy.csv --stamps $W/$P-copy-stamps.csv.gz > $W/$P-copy-run.log 2>&1
log "end copy rc=$? rows=$(( $(wc -l < $W/$P-copy.csv) - 1 ))"
pack
Z=2,4,8,16,32,64,128,256,384,512,768,1024
for v in ch24:"" ch8:"NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8"; do
  name=${v%%:*}; envs=${v#*:}
  log "start $name env [$envs]"
  env $envs CUDA_VISIBLE_DEVICES=0,1 timeout 100 torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py \
    --out $W/$P-$name.csv --variant $name --ops all_reduce --sizes $Z --est-gbps 350 > $W/$P-$name-run.log 2>&1
  log "end $name rc=$?"
  pack
done
log "start copy2 (the bidir rows again: drift)"
timeout 90 python $G/nvlink_copy.py --modes bidir --ctas 8,12,24,32 --out $W/$P-copy2.csv > $W/$P-copy2-run.log 2>&1
log "end copy2 rc=$?"
log "done"; pack
