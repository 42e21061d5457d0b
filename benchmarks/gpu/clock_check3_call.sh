#!/bin/bash
# Run al (p12clock3): clock_check3.py (rows never timed) on one H100 of the device machine; env
# before and after.   OUT=... bash benchmarks/gpu/clock_check3_call.sh
export CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$(dirname "$0")"
T0=$(date +%s)
{ date -u
  nvidia-smi --query-gpu=index,name,pci.bus_id,uuid,driver_version,power.limit,power.default_limit,power.max_limit,clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem,temperature.gpu --format=csv
  nvidia-smi -q -i 0 -d POWER,CLOCK,PERFORMANCE,TEMPERATURE
  python3 -c 'import torch, pynvml; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0)); print("pynvml", pynvml.__file__)'
  nproc; uname -r; } > $OUT/env.txt 2>&1
timeout 420 python3 clock_check3.py $OUT > $OUT/log.txt 2>&1
echo "clock_check3 rc=$? $(( $(date +%s) - T0 )) s"
{ date -u; nvidia-smi -q -i 0 -d PERFORMANCE,POWER,TEMPERATURE,CLOCK; } > $OUT/env-after.txt 2>&1
gzip -f $OUT/events.csv
grep -v "^{'row" $OUT/log.txt | tail -30
ls -la $OUT
