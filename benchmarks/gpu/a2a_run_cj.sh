#!/bin/bash
# Run cj (issue 17, P12): every all-to-all call timed alone (collective_percall.py) at 1, 4 and 16 p2p channels a
# peer on two H200s, each at the sizes that give a channel 8 and 16 chunks of 512 KiB; registered before this
# lease (h200x2-20261130cj-a2a-hypotheses.md; a2a_channels.py --percall reads the CSVs).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_cj.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130cj
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > $W/$P-env.txt 2>&1
# p2p channels : sizes in MiB of S (a channel 8 and 16 chunks)
for v in "2:8,16" "8:32,64" "32:128,256"; do
  IFS=: read -r p2p sizes <<< "$v"
  name=p2p$p2p
  log "start $name sizes $sizes"
  NCCL_MIN_P2P_NCHANNELS=$p2p NCCL_MAX_P2P_NCHANNELS=$p2p NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT CUDA_VISIBLE_DEVICES=0,1 \
    timeout -k 10 120 torchrun --standalone --nproc_per_node 2 $G/collective_percall.py --out $W/$P-$name.csv \
    --variant $name --ops all_to_all --sizes $sizes > $W/$P-$name-run.log 2>&1
  log "end $name rc=$? $(grep -h 'p2p channels per peer' $W/$P-$name-run.log | head -1 | sed 's/.*INFO //')"
  gzip -f $W/$P-$name.csv; pack
done
log "done"; pack
