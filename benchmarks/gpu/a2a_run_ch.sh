#!/bin/bash
# Run ch (issue 17, P12): the all-to-all's p2p channels by their count, registered before this lease
# (h200x2-20261130ch-a2a-hypotheses.md; a2a_channels.py reads the CSVs). collective_ramp_diag.py on two
# H200s, eager rows (calls back to back between events): sendrecv (each rank its part S / 2 to the other)
# and send_oneway (rank 1 to rank 0) at 1, 2, 4, 8, 16 and 32 p2p channels a peer (NCCL_MIN/MAX_P2P_NCHANNELS
# 2 ... 64; 32 is NCCL's default), each at the four sizes that give a channel 2, 4, 8 and 16 MiB of its part
# (4-32 chunks of 512 KiB: NCCL never doubles the channels there).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_ch.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) P=h200x2-20261130ch ;; *) P=h100x2-20261130ch ;; esac
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run ch: $(hostname) $GPU"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
  nproc; env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort
} > $W/$P-topo-env.txt 2>&1
pack
# p2p channels (NCCL_MIN/MAX_P2P_NCHANNELS) : channels a peer : sizes in MiB of S (2 x channels x 2, 4, 8, 16)
for v in "2:1:4,8,16,32" "4:2:8,16,32,64" "8:4:16,32,64,128" "16:8:32,64,128,256" "32:16:64,128,256,512" \
         "64:32:128,256,512,1024"; do
  IFS=: read -r p2p ch sizes <<< "$v"
  file=$P-p2p$p2p-eager
  est=$(( ch * 20 ))
  log "start $file ($ch channels a peer) sizes $sizes"
  NCCL_MIN_P2P_NCHANNELS=$p2p NCCL_MAX_P2P_NCHANNELS=$p2p NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV CUDA_VISIBLE_DEVICES=0,1 \
    timeout 150 torchrun --standalone --nproc_per_node 2 \
    $G/collective_ramp_diag.py --out $W/$file.csv --variant p2p$p2p --ops sendrecv,send_oneway --cases eager \
    --sizes $sizes --est-gbps $est > $W/$file-run.log 2>&1
  log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -h 'p2p channels per peer' $W/$file-run.log | head -1 | sed 's/.*INFO //')"
  pack
done
log "done"; pack
