# Sourced by the collectives_run_*.sh device scripts (runs ay, az, ba) after they set P (the files' prefix):
# NVLink multicast off, the machine's environment to $W/$P-env.txt, and step() for one torchrun of
# collectives.py, repacking $OUT/results.tgz after each; custom_ar_step() for one custom_ar.py run (runs da-dh).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/w; mkdir -p $W; G=benchmarks/gpu
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m; python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())"
} > $W/$P-env.txt 2>&1
step() {  # step NAME NPROC DEVICES LIMIT ARGS...: one torchrun of collectives.py
  local name=$1 n=$2 dev=$3 lim=$4; shift 4
  echo "$(date -u +%T) start $name: $*" >> $W/$P-main.log
  CUDA_VISIBLE_DEVICES=$dev timeout -k 10 $lim torchrun --standalone --nproc_per_node $n $G/collectives.py \
    --out $W/$P-$name.csv "$@" > $W/$P-$name-run.log 2>&1
  echo "$(date -u +%T) end $name rc=$?" >> $W/$P-main.log
  tar czf $OUT/results.tgz -C $W .
}
custom_ar_step() {  # custom_ar_step RUN DEVICES: custom_ar.py --run RUN (runs da-dh), repacking $OUT/results.tgz after
  echo "$(date -u +%T) start custom_ar --run $1" >> $W/$P-main.log
  CUDA_VISIBLE_DEVICES=$2 timeout -k 10 300 python $G/custom_ar.py --run $1 --out $W/$P-custom-ar.csv \
    > $W/$P-custom-ar-run.log 2>&1
  echo "$(date -u +%T) end custom_ar rc=$?" >> $W/$P-main.log
  tar czf $OUT/results.tgz -C $W .
}
