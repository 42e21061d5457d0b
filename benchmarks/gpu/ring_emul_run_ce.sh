#!/bin/bash
# Run ce (issue 17, P12): the ring's channels in the engine, frozen before this lease
# (h200x2-20261129ce-predicted.txt, ring_predict.py --frozen; checks in
# h200x2-20261129ce-ring-hypotheses.md). NCCL's graph rows (collective_ramp_diag.py) on two H200s:
# its defaults (all-reduce, all-gather, reduce-scatter), the all-reduce at 12, 16 and 32 forced ring
# channels and with a 1 MiB and a 16 MiB NCCL_BUFFSIZE.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_emul_run_ce.sh
# (RUN=cu DAY=20261130: the same rows for run cu, ring_post_run_cu.sh)
RUN=${RUN:-ce}; DAY=${DAY:-20261129}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-$DAY$RUN ;; *) P=h100x2-$DAY$RUN ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run $RUN: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
Z=2,4,8,16,32,64,96,128,256,384,512,768,1024,1536,2048
for v in def:all_reduce,all_gather,reduce_scatter: ch12:all_reduce:"NCCL_MIN_NCHANNELS=12 NCCL_MAX_NCHANNELS=12" \
         ch16:all_reduce:"NCCL_MIN_NCHANNELS=16 NCCL_MAX_NCHANNELS=16" ch32:all_reduce:"NCCL_MIN_NCHANNELS=32 NCCL_MAX_NCHANNELS=32" \
         buf1m:all_reduce:"NCCL_BUFFSIZE=1048576" buf16m:all_reduce:"NCCL_BUFFSIZE=16777216"; do
  name=${v%%:*}; rest=${v#*:}; ops=${rest%%:*}; envs=${rest#*:}
  log "start $name ops $ops env [$envs]"
  env $envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 timeout 150 torchrun --standalone --nproc_per_node 2 \
    $G/collective_ramp_diag.py --out $W/$P-$name.csv --variant $name --ops $ops --sizes $Z --est-gbps 350 > $W/$P-$name-run.log 2>&1
  log "end $name rc=$? $(grep -h 'coll channels' $W/$P-$name-run.log | head -1 | sed 's/.*INFO //')"
  pack
done
log "done"; pack
