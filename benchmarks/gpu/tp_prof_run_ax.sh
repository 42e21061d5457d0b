#!/bin/bash
# Run ax (issue 17, P12): run an's TP2 prefill rows on two H200s, each timed clean (3 + 20 steps, as
# collectives.py) and then one step profiled on both ranks (tp_prof.py --measure), the SM clock sampled by
# nvidia-smi every 50 ms throughout (as run au). Frozen before the run: h200x2-20261128ax-tp2prof-predicted.txt.
# One row a torchrun, after 15 s idle (the model starts each row from an idle GPU; one profiler session a
# process, so no row is timed after a session: run at).
# Usage on the device, from the repo root: OUT=<dir> G=.gpudev bash .gpudev/tp_prof_run_ax.sh
# Results: $OUT/results.tgz (repacked after every row).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
P=h200x2-20261128ax; W=/tmp/w; mkdir -p $W; G=${G:-benchmarks/gpu}
T0=$(date +%s)
log() { echo "$(date +%s.%N) [$(( $(date +%s) - T0 ))s] $*" >> $W/$P-main.log; }
pack() { mv -f $W/tpprof-steps.csv $W/$P-steps.csv 2>/dev/null; for r in 0 1; do
  mv -f $W/tpprof-kernels-r$r.csv.gz $W/$P-kernels-r$r.csv.gz 2>/dev/null; done
  tar czf $OUT/results.tgz -C $W . ; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m; python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())"
  env | grep -E "^(NCCL|NVSHMEM|TORCH|CUDA)" | sort; } > $W/$P-env.txt 2>&1
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,nounits -lms 50 > $W/$P-clock.csv 2>&1 &
SMI=$!
row() {  # row NAME MODEL LENGTH LIMIT: one torchrun of tp_prof.py --run, after 15 s idle
  local name=$1 model=$2 len=$3 lim=$4
  local left=$(( ${BUDGET:-530} - ($(date +%s) - T0) ))
  [ $left -lt 40 ] && { log "skip $name (${left}s left)"; return; }
  [ $lim -gt $((left - 20)) ] && lim=$((left - 20))
  sleep 15; log "start $name (limit ${lim}s)"
  # the files of earlier rows are appended to under their working names
  mv -f $W/$P-steps.csv $W/tpprof-steps.csv 2>/dev/null
  for r in 0 1; do mv -f $W/$P-kernels-r$r.csv.gz $W/tpprof-kernels-r$r.csv.gz 2>/dev/null; done
  OUT=$W timeout -k 10 $lim torchrun --standalone --nproc_per_node 2 $G/tp_prof.py --measure --tp-model $model \
    --prefill $len > $W/$P-$name-run.log 2>&1
  log "end $name rc=$?"
  pack
}
row 70b-1k llama-3.1-70b 1024 120
row 70b-4k llama-3.1-70b 4096 150
row 8b-4k llama-3.1-8b 4096 80
row 8b-16k llama-3.1-8b 16384 100
row 8b-1k llama-3.1-8b 1024 60
kill $SMI; sleep 1; gzip -f $W/$P-clock.csv; log done; pack
