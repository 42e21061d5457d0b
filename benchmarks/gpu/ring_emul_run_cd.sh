#!/bin/bash
# Run cd (issue 17, P12): the Simple ramp and NCCL's cluster launch. NCCL launches its kernel in
# clusters of NCCL_CGA_CLUSTER_SIZE CTAs (4 by default on sm90, spread over the GPCs); run cc's
# emulation launched plain CTAs. Here: ring_emul.py plain (nccl) and in clusters of 4 (cl4) at
# 8-32 channels, each channel's SM recorded; NCCL's all-reduce (graph rows of
# collective_ramp_diag.py) at its default channels with clusters of 4 (the default), 0 (no
# cluster attribute), 1, 2 and 8; the emulation's 24-channel rows again (drift).
# Hypotheses: h200x2-20261129cd-cluster-hypotheses.md, committed before the run.
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/ring_emul_run_cd.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261129cd ;; *) P=h100x2-20261129cd ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run cd: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch, cupy; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count(), cupy.__version__)"
  nproc; lscpu | grep -E "Model name|Socket|NUMA node"; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
Z=2,4,8,16,32,64,128,256,384,512,768,1024,1536,2048
log "start emul"
timeout 300 python $G/ring_emul.py --variants nccl,cl4 --channels 8,12,16,24,32 --sizes $Z \
  --out $W/$P-emul.csv --stamps $W/$P-emul-stamps.csv.gz > $W/$P-emul-run.log 2>&1
log "end emul rc=$? rows=$(( $(wc -l < $W/$P-emul.csv) - 1 ))"
pack
for k in 4 0 1 2 8; do
  log "start cga$k"
  NCCL_CGA_CLUSTER_SIZE=$k NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV CUDA_VISIBLE_DEVICES=0,1 timeout 120 \
    torchrun --standalone --nproc_per_node 2 $G/collective_ramp_diag.py \
    --out $W/$P-cga$k.csv --variant cga$k --ops all_reduce --sizes $Z --est-gbps 350 > $W/$P-cga$k-run.log 2>&1
  log "end cga$k rc=$?"
  pack
done
log "start emul2 (24 channels again: drift)"
timeout 90 python $G/ring_emul.py --variants nccl,cl4 --channels 24 --sizes $Z --out $W/$P-emul2.csv > $W/$P-emul2-run.log 2>&1
log "end emul2 rc=$?"
log "done"; pack
