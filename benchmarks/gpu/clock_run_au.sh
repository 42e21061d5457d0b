#!/bin/bash
# Run au (issue 17, P12): the SM clock during run an's TP2 prefill rows, sampled by nvidia-smi every 50 ms.
# Frozen before the run: h200x2-20261128au-clock-predicted.md (the opt-in controllers' clock at the end of each row).
# Usage on the device, from the repo root: OUT=<dir> G=.gpudev bash .gpudev/clock_run_au.sh
# Results: $OUT/results.tgz: the collectives.py CSVs and logs (each printed row stamped with the host's epoch
# seconds, so a row spans the time from the previous stamp to its own) and the clock samples (-clock.csv).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261128au; W=/tmp/w; mkdir -p $W; G=${G:-benchmarks/gpu}
stamp() { while IFS= read -r l; do echo "$(date +%s.%N) $l"; done; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; } > $W/$P-env.txt 2>&1
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,nounits -lms 50 > $W/$P-clock.csv 2>&1 &
SMI=$!
step() {  # step NAME LIMIT ARGS...: one torchrun of collectives.py, after 15 s idle (the model starts each row from idle)
  local name=$1 lim=$2; shift 2
  sleep 15; echo "$(date +%s.%N) start $name" >> $W/$P-marks.txt
  timeout -k 10 $lim torchrun --standalone --nproc_per_node 2 $G/collectives.py --out $W/$P-$name.csv "$@" 2>&1 \
    | stamp > $W/$P-$name-run.log
  echo "$(date +%s.%N) end $name" >> $W/$P-marks.txt
  tar czf $OUT/results.tgz -C $W .
}
step 70b 200 --only e2e --e2e prefill --tp-model llama-3.1-70b --prefill 1024,4096
step 8b 120 --only e2e --e2e prefill --prefill 4096,16384
kill $SMI; sleep 1; tar czf $OUT/results.tgz -C $W .
