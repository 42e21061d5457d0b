"""Run tp_shard.measure() from DIR (main's benchmarks/gpu = old, .gpudev/cleanup = new) on one
fixed small case, writing under OUTDIR. ``--check``: only say which measure.py it would use."""

import os
import sys

d, out = os.path.abspath(sys.argv[1]), sys.argv[2]
sys.path.insert(0, d)
import measure  # noqa: E402  the copy beside tp_shard.py; tp_shard's own import reuses it

print(
    "measure.py:", measure.__file__, "replay_times:", hasattr(measure, "replay_times"), flush=True
)
import tp_shard as T  # noqa: E402

print("tp_shard.py:", T.__file__, "_graph_us:", hasattr(T, "_graph_us"), flush=True)
assert os.path.dirname(os.path.abspath(T.__file__)) == d
assert os.path.dirname(os.path.abspath(measure.__file__)) == d
if "--check" in sys.argv:
    sys.exit(0)
os.makedirs(out, exist_ok=True)
os.environ["OUT"] = out
T.RUNS = [("tp2_b8_l8192", "flash"), ("tp2_b8_l8192", "default")]
T.measure()  # os._exit(0) at its end
