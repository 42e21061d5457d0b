#!/bin/bash
# Run ak: the CUDA-graph replay loop moved into measure.replay_times (branch cleanup): old
# (main's benchmarks/gpu) and new (the branch's copies in .gpudev/cleanup/: measure.py, tp_shard.py,
# small_kernels.py, sweep.py, gemm_shapes.py) back to back, A B A B, one GPU. From the repo root.
set -u
O=${OUT:-/tmp/akout}; mkdir -p "$O"
NEW=.gpudev/cleanup; OLD=benchmarks/gpu
T0=$SECONDS
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader; python -c "import torch; print(torch.__version__, torch.version.cuda)"; } > "$O/env.txt" 2>&1
for round in 1 2; do
  if [ $round = 2 ] && [ $((SECONDS - T0)) -gt 190 ]; then echo "skip round 2 at $((SECONDS - T0)) s" >> "$O/env.txt"; break; fi
  for v in old new; do
    d=$OLD; [ $v = new ] && d=$NEW
    echo "== tp $v $round start $((SECONDS - T0)) s" >> "$O/env.txt"
    timeout 100 python benchmarks/gpu/timing_loop_check_tp.py $d "$O/tp-$v-$round" > "$O/tp-$v-$round.log" 2>&1; echo "rc $?" >> "$O/tp-$v-$round.log"
  done
  for v in old new; do
    d=$OLD; [ $v = new ] && d=$NEW
    echo "== sk $v $round start $((SECONDS - T0)) s" >> "$O/env.txt"
    timeout 70 python $d/small_kernels.py --out "$O/sk-$v-$round.csv" --kernels "$O/sk-$v-$round-kernels.csv" --only rmsnorm > "$O/sk-$v-$round.log" 2>&1; echo "rc $?" >> "$O/sk-$v-$round.log"
  done
done
echo "end $((SECONDS - T0)) s" >> "$O/env.txt"
# the kernels CSVs of tp are large: keep only their per-row counts
for f in "$O"/tp-*/tpshard-kernels.csv; do python - "$f" <<'PY'
import csv, sys, collections
c = collections.Counter()
for r in csv.DictReader(open(sys.argv[1])):
    c[(r["row"], r["replay"])] += 1
with open(sys.argv[1].replace(".csv", "-counts.txt"), "w") as fh:
    for k, v in sorted(c.items()):
        print(*k, v, file=fh)
PY
gzip -9 "$f"; done
ls -la "$O" "$O"/tp-* >> "$O/env.txt"
# added after run ak: `run` returns at most 8 files, so everything goes back as one archive
tar czf /tmp/ak-all.tgz -C "$O" . && rm -rf "${O:?}"/* && mv /tmp/ak-all.tgz "$O/"
