#!/bin/bash
# Run cc (issue 17, P12): the Simple ramp with NCCL's protocol and nothing else. ring_emul.py (a
# two-GPU ring all-reduce emulated channel by channel: NCCL's loops, chunks, slices, FIFOs and
# flags; with and without the last step's local copy; 4-32 channels), then on the same lease NCCL's
# own all-reduce (graph rows of collective_ramp_diag.py) at its default channels and at 8, the
# comparison the hypotheses need (h200x2-20261129cc-ring-hypotheses.md, committed before the run).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_emul_run_cc.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261129cc ;; *) P=h100x2-20261129cc ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $OUT/main.log; }
pack() { cp $OUT/main.log $W/$P-main.log; tar czf $OUT/results.tgz -C $W . ; }
log "run cc: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch, cupy; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count(), cupy.__version__)"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
Z=2,4,8,16,32,64,128,256,384,512,768,1024,1536,2048
log "start emul (smoke: 24 channels, 2-64 MiB)"
timeout 60 python $G/ring_emul.py --channels 24 --sizes 2,64 --per 4 --reps 2 --out $W/$P-smoke.csv > $W/$P-smoke-run.log 2>&1
log "end smoke rc=$?"
log "start emul"
timeout 300 python $G/ring_emul.py --sizes $Z --out $W/$P-emul.csv --stamps $W/$P-emul-stamps.csv.gz > $W/$P-emul-run.log 2>&1
log "end emul rc=$? rows=$(( $(wc -l < $W/$P-emul.csv) - 1 ))"
pack
for v in ch24:"" ch8:"NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8"; do
  name=${v%%:*}; envs=${v#*:}
  log "start $name env [$envs]"
  env $envs CUDA_VISIBLE_DEVICES=0,1 timeout 120 torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py \
    --out $W/$P-$name.csv --variant $name --ops all_reduce --sizes $Z --est-gbps 350 > $W/$P-$name-run.log 2>&1
  log "end $name rc=$?"
  pack
done
log "start emul2 (nccl variant at 24 channels again: drift)"
timeout 90 python $G/ring_emul.py --variants nccl --channels 24 --sizes $Z --out $W/$P-emul2.csv > $W/$P-emul2-run.log 2>&1
log "end emul2 rc=$?"
log "done"; pack
