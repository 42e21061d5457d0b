#!/bin/bash
# Run ck (issue 17, P12): what NCCL's 8 and 16 p2p channels a peer share besides the link, registered before this
# lease (h200x2-20261130ck-a2a-hypotheses.md; `a2a_channels.py --variants` reads the CSVs). collective_ramp_diag.py
# on two H200s, eager rows (calls back to back between events): sendrecv (both ways) and send_oneway (one way) at
# 8 and 16 p2p channels a peer (NCCL_MIN/MAX_P2P_NCHANNELS 16 and 32) under each CTA cluster size of NCCL's launch
# (NCCL_CGA_CLUSTER_SIZE 0, 1, 2, 4, 8; 4 is sm90's default) and NCCL's default again, then with P2P read
# (NCCL_P2P_READ_ENABLE=1: the receiver pulls over NVLink where sm90's default has the sender write) at 8, 16
# and 32 a peer; each at the four sizes that give a channel 2, 4, 8 and 16 MiB of its part (run ch's).
# Usage on the device, from the repo root: OUT=<dir> bash benchmarks/gpu/a2a_run_ck.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261130ck
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu; T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s $(date -u +%H:%M:%S)] $*" | tee -a $W/$P-main.log; }
pack() { tar czf $OUT/results.tgz -C $W . ; }
log "run ck: $(hostname) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ date -u; nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > $W/$P-env.txt 2>&1
pack
SIZES16=32,64,128,256; SIZES32=64,128,256,512; SIZES64=128,256,512,1024
# variant : environment (besides the p2p channels)
for v in "def:" "cga0:NCCL_CGA_CLUSTER_SIZE=0" "cga1:NCCL_CGA_CLUSTER_SIZE=1" "cga2:NCCL_CGA_CLUSTER_SIZE=2" \
         "cga4:NCCL_CGA_CLUSTER_SIZE=4" "cga8:NCCL_CGA_CLUSTER_SIZE=8" "read:NCCL_P2P_READ_ENABLE=1"; do
  IFS=: read -r name envs <<< "$v"
  counts="16 32"; [ "$name" = read ] && counts="16 32 64"
  for p2p in $counts; do
    eval sizes=\$SIZES$p2p
    file=$P-$name-p2p$p2p-eager
    log "start $file sizes $sizes"
    env $envs NCCL_MIN_P2P_NCHANNELS=$p2p NCCL_MAX_P2P_NCHANNELS=$p2p NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
      CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 150 torchrun --standalone --nproc_per_node 2 \
      $G/collective_ramp_diag.py --out $W/$file.csv --variant $name-p2p$p2p --ops sendrecv,send_oneway --cases eager \
      --sizes $sizes --est-gbps $(( p2p * 10 )) > $W/$file-run.log 2>&1
    log "end $file rc=$? rows=$(( $(wc -l < $W/$file.csv) - 1 )) $(grep -h 'p2p channels per peer' $W/$file-run.log | head -1 | sed 's/.*INFO //') $(grep -ohE 'P2P/[A-Za-z/]+' $W/$file-run.log | sort -u | tr '\n' ' ') $(grep -oh 'NCCL_CGA_CLUSTER_SIZE set[^\r]*' $W/$file-run.log | head -1)"
    pack
  done
done
log "done"; pack
