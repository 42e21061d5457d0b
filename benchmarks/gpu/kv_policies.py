"""docs/gpu.md's "KV policies on the GPU model" table, rendered from the GPU model (CPU only).

    PYTHONPATH=. python benchmarks/gpu/kv_policies.py [--write]

Llama-3.1-8B decode on one H100 (hw_configs/h100.yaml), batch 16, 32K prompt, CUDA graph,
compressing policies at 4x: per policy the KV each sequence keeps, the step (the embedding, the
32 decoder layers and the LM head on the last position), its attention kernels and tokens/s. Prints the
table's markdown rows; ``--write`` replaces docs/gpu.md's ``kv-policies`` block with them.
tests/gpu/test_kv_policies.py checks that block against ``table()`` line for line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rdusim.analysis.gpu.predict import MEASURED_LAYER, simulate_gpu_step
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, KvPolicySpec, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.model.policy import kv_length

ROOT = Path(__file__).resolve().parents[2]
MARKER = "kv-policies"
BATCH, SEQ_LEN, MODE = 16, 32768, "graph"
POLICIES = (("full", 1.0), ("streamingllm", 4.0), ("snapkv", 4.0), ("snapstream", 4.0), ("kascade", 1.0))


def attention_seconds(kernels: dict[str, float]) -> float:
    """The step's attention: the kernels named ``attention*`` (with FA2's split-KV combine) and
    Kascade's ``kascade.*`` (score, softmax sum, top-k, gather, sparse attention and its combine)."""
    return sum(t for name, t in kernels.items() if "attention" in name or name.startswith("kascade"))


def table(hw: Path = ROOT / "hw_configs/h100.yaml") -> list[str]:
    model = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    gpu = Gpu(load_spec(hw, GpuSpec))
    out = ["| policy | KV kept per sequence | step (ms) | attention (ms) | tokens/s |",
           "|---|---:|---:|---:|---:|"]
    for name, compression in POLICIES:
        policy = KvPolicySpec(name=name, compression=compression)
        step = simulate_gpu_step(model, gpu, layer=MEASURED_LAYER, head=["embedding", "lm_head"], phase="decode",
                                 batch=BATCH, seq_len=SEQ_LEN, mode=MODE, policy=policy)
        out.append(f"| {name} | {kv_length(SEQ_LEN, policy)} | {step.seconds * 1e3:.2f} "
                   f"| {attention_seconds(step.kernels) * 1e3:.2f} | {BATCH / step.seconds:.0f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help=f"replace docs/gpu.md's {MARKER} block")
    args = ap.parse_args(argv)
    lines = table()
    print("\n".join(lines))
    if args.write:
        from compare import _between  # the sibling that rewrites compare.py's blocks of docs/gpu.md

        doc = ROOT / "docs/gpu.md"
        doc.write_text(_between(doc.read_text(), MARKER, lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
