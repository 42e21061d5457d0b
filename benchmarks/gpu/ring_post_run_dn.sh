#!/bin/bash
# Run dn (issue 17, P12): where NCCL makes a ring slice's post. The protocol emulated (ring_emul.py) with the lead
# thread posting (cl4) and with NCCL's post warp (cl4w), on rings of two and four H200s, beside NCCL's own graph rows
# on the same GPUs. Hypotheses: h200x4-20261130dn-postwarp-hypotheses.md; frozen: h200x4-20261130dn-predicted.txt;
# ring_post.py --verdict-dn. Needs a lease of nvidia-h200-x4; on nvidia-h200-x2, RANKS=2 runs the two-rank half
# (files h200x2-20261130dn-*).
# GRAPHS=1 (the second addendum, after run dp): the emulation replayed from CUDA graphs (ring_emul.py --graphs).
# Usage on the device, from the repo root: OUT=<dir> [RANKS="2 4"] [GRAPHS=1] bash benchmarks/gpu/ring_post_run_dn.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
RANKS=${RANKS:-2 4}; P=h200x$(nvidia-smi -L | wc -l)-20261130dn
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run dn: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch, cupy; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count(), cupy.__version__)"
} > $W/$P-env.txt 2>&1
pack
Z=2,4,8,16,32,64,128
for r in $RANKS; do
  dev=$(seq -s, 0 $((r - 1)))
  log "start emul r$r"
  CUDA_VISIBLE_DEVICES=$dev timeout -k 10 240 python $G/ring_emul.py --ranks $r --variants cl4,cl4w ${GRAPHS:+--graphs} \
    --ops all_reduce,reduce_scatter,all_gather --channels 4,24 --sizes $Z --stamp-all \
    --out $W/$P-emul-r$r.csv --stamps $W/$P-emul-r$r-stamps.csv.gz > $W/$P-emul-r$r-run.log 2>&1
  log "end emul r$r rc=$? $(grep -c '^check.*ok' $W/$P-emul-r$r-run.log) checks ok"
  pack
  log "start nccl r$r"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=$dev timeout -k 10 200 torchrun --standalone \
    --nproc_per_node $r $G/collective_ramp_diag.py --out $W/$P-nccl-r$r.csv --variant def \
    --ops all_reduce,reduce_scatter,all_gather --sizes $Z --est-gbps 300 > $W/$P-nccl-r$r-run.log 2>&1
  log "end nccl r$r rc=$? $(grep -h 'coll channels' $W/$P-nccl-r$r-run.log | head -1 | sed 's/.*INFO //')"
  pack
done
log "done"; pack
