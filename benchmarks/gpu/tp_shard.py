"""One GPU's share of a Llama-3.1-8B TP2 decode step, its kernels one by one (P12, run ab).

Run aa (two H200s) measured the TP2 decode steps at batch 64 x 2048 and 128 x 1024 keys 19-20%
under the model, the smaller batches within 4% (docs/gpu.md, "Measured on two H200s"). This
script runs the shard's kernels alone on one GPU (16 query heads, 4 KV heads, FFN 7168, vocabulary
64128; no NCCL: the all-reduces and the logits gather are left out) as a CUDA graph, times the
graph, and profiles its replays kernel by kernel.

- ``--predict``: the model's per-class times of the same shard steps (rdusim; CPU), frozen
  before the run in ``h200-20261128ab-tpshard-predicted.txt``.
- default: the measurement (torch only; the device has no rdusim): ``$OUT/tpshard.csv`` (graph
  step time per row) and ``$OUT/tpshard-kernels.csv`` (every kernel of the profiled replays).
- ``--compare KERNELS_CSV STEPS_CSV``: per-class measured vs predicted (rdusim; CPU).
- ``--model llama-3.1-70b`` (run ap): one GPU's share of Llama-3.1-70B's TP8 step (8 query heads,
  1 KV head, FFN 3584, vocabulary 16032, 80 layers), as ``rdusim compare-hw`` prices it on 8 x H200
  (mappings/llama-3.1-70b/decode-h200x8.yaml), and a TP4 shard; FlashAttention forced; frozen in
  ``h200-20261128ap-tpshard70-predicted.txt``; files ``$OUT/tpshard70*.csv``.
- ``--model llama-3.1-8b-tp4`` (run aw): Llama-3.1-8B's TP4 shard (8 query heads, 2 KV heads, FFN
  3584, vocabulary 32064, 32 layers) at run an's two long-KV points that miss (b1 and b8 x 8192),
  its b1 x 1024 and b128 x 1024 as controls, the TP2 shard at b1 and b8 x 8192 for contrast, and
  run an's other two TP4 points (b32 x 4096, b64 x 2048);
  FlashAttention forced; frozen in ``h200-20261128aw-tpshard8tp4-predicted.txt``; files
  ``$OUT/tpshard8tp4*.csv``. The kernels CSV has each kernel's grid and block (the profiler's
  trace), so the split-KV kernel's CTAs and the combine's ``Log_max_splits`` can be read.
- ``--model llama-3.1-8b-tp4 --types KERNELS_CSV`` (P12, after run ay): run aw's residual by
  kernel type and by kernel path against the model, with three candidates' effect on the step
  (``-types.txt``); ``--norms``: every profiled in-step RMSNorm against the model (``-norms.txt``).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import statistics
import sys
from pathlib import Path

#: the full models' splits, literal (the device has no rdusim); tests/gpu/test_tp_shard.py checks
#: them against rdusim's model documents (rdusim/config/models/llama-3.1-*.yaml)
LLAMA_8B = dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256)
LLAMA_70B = dict(layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672, vocab=128256)

#: (name, tp, batch, kv_len): the two rows of run aa that miss, its batch-8 row as a control, and
#: the single-GPU step whose attention grid (512 CTAs of 16 key tiles) is the batch-128 shard's
ROWS = [
    ("tp2_b64_l2048", 2, 64, 2048),
    ("tp2_b128_l1024", 2, 128, 1024),
    ("tp2_b8_l8192", 2, 8, 8192),
    ("tp1_b64_l1024", 1, 64, 1024),
]

#: (row, SDPA backend) measured: "default" is SDPA's own choice, as collectives.py ran the TP steps
#: (it never calls measure.py's ``pick_sdpa_backend``); "flash" forces FlashAttention, as the
#: single-GPU sweeps (sweep.py, small_kernels.py) did
RUNS = [
    ("tp2_b64_l2048", "default"),
    ("tp2_b128_l1024", "default"),
    ("tp2_b8_l8192", "default"),
    ("tp2_b64_l2048", "flash"),
    ("tp2_b128_l1024", "flash"),
    ("tp1_b64_l1024", "flash"),
    ("tp1_b64_l1024", "default"),
]

#: run ap's rows of Llama-3.1-70B: the TP8 shard at compare-hw's point (b32 x 8192) and around
#: it, then a TP4 shard (35 GB of weights, 21 GB of KV) at the same point; FlashAttention forced
ROWS_70B = [
    ("tp8_b32_l8192", 8, 32, 8192),
    ("tp8_b1_l8192", 8, 1, 8192),
    ("tp8_b8_l8192", 8, 8, 8192),
    ("tp8_b64_l4096", 8, 64, 4096),
    ("tp8_b128_l2048", 8, 128, 2048),
    ("tp4_b32_l8192", 4, 32, 8192),
]
RUNS_70B = [(name, "flash") for name, *_ in ROWS_70B]

#: run aw's rows of Llama-3.1-8B: the TP4 shard at run an's two points 8-10% longer than the model
#: (b1 and b8 x 8192), two controls within 2% there (b1 and b128 x 1024), the TP2 shard at the
#: same two long-KV points (run an's fallback: -5%, -2%), and run an's two other TP4 points (b32 x
#: 4096 -5%, b64 x 2048 -3%); FlashAttention forced
ROWS_8B_TP4 = [
    ("tp4_b1_l8192", 4, 1, 8192),
    ("tp4_b8_l8192", 4, 8, 8192),
    ("tp4_b1_l1024", 4, 1, 1024),
    ("tp4_b128_l1024", 4, 128, 1024),
    ("tp2_b1_l8192", 2, 1, 8192),
    ("tp2_b8_l8192", 2, 8, 8192),
    ("tp4_b32_l4096", 4, 32, 4096),
    ("tp4_b64_l2048", 4, 64, 2048),
]
#: measured TP4 rows first, then TP2 (one shard model built per TP a pass)
RUNS_8B_TP4 = [(name, "flash") for name, *_ in sorted(ROWS_8B_TP4, key=lambda r: -r[1])]

#: --model: (full shape, rows, runs, file tag, run, rdusim model document)
MODELS = {
    "llama-3.1-8b": (LLAMA_8B, ROWS, RUNS, "", "ab", "llama-3.1-8b"),
    "llama-3.1-70b": (LLAMA_70B, ROWS_70B, RUNS_70B, "70", "ap", "llama-3.1-70b"),
    "llama-3.1-8b-tp4": (LLAMA_8B, ROWS_8B_TP4, RUNS_8B_TP4, "8tp4", "aw", "llama-3.1-8b"),
}


def shard_shape(full: dict[str, int], tp: int) -> dict[str, int]:
    """One GPU's share of ``full`` at ``tp``: heads, KV heads, FFN and vocabulary split."""
    return {
        **full,
        "heads": full["heads"] // tp,
        "kv_heads": max(1, full["kv_heads"] // tp),
        "ffn": full["ffn"] // tp,
        "vocab": full["vocab"] // tp,
    }


#: timed replays of each step's graph (measure.py's ``replay_times``, after 3 untimed)
GRAPH_REPS = 20

#: the model's kernel classes of MEASURED_LAYER and the head, as compared
CLASSES = [
    "attention",
    "gemm_qkv",
    "gemm_o",
    "gemm_gate_up",
    "gemm_down",
    "lm_head",
    "rope",
    "kv_append",
    "rms_norm",
    "silu_mul",
    "residual_add",
    "other",
]


def _model_class(key: str) -> str:
    key = key.split(".")[0]
    return {
        "qkv_gemm": "gemm_qkv",
        "o_gemm": "gemm_o",
        "gate_up_gemm": "gemm_gate_up",
        "down_gemm": "gemm_down",
        "final_norm": "rms_norm",
        "embedding": "other",
    }.get(key, key)


def model_classes(kernels: dict[str, float]) -> dict[str, float]:
    """A model step's kernel times (seconds by kernel name) summed by compared class (``_model_class``), us."""
    out: dict[str, float] = {}
    for key, s in kernels.items():
        out[_model_class(key)] = out.get(_model_class(key), 0.0) + s * 1e6
    return out


def _model_step(model, gpu, tp: int, batch: int, kv: int):
    """The model's graph decode step of one GPU's shard (``simulate_gpu_step``: the measured
    layer, the embedding and the LM head), as ``predict`` and ``attention_pairs`` compare it."""
    from rdusim.analysis.gpu.predict import MEASURED_LAYER, simulate_gpu_step

    return simulate_gpu_step(model, gpu, layer=list(MEASURED_LAYER), head=["embedding", "lm_head"],
                             phase="decode", batch=batch, seq_len=kv, mode="graph", tp=tp)


def predict(
    gpus: list[str], model_name: str = "llama-3.1-8b"
) -> dict[tuple[str, str], dict[str, float]]:
    """{(gpu, row): {class: us}} of the shard step, rdusim's model (no collectives)."""
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import load_gpu_node

    model = load_spec(model_path(MODELS[model_name][5]), ModelSpec)
    out = {}
    for g in gpus:
        gpu = load_gpu_node(f"hw_configs/{g}.yaml").gpu
        for name, tp, batch, kv in MODELS[model_name][1]:
            step = _model_step(model, gpu, tp, batch, kv)
            cls = model_classes(step.kernels)
            cls["step"] = step.seconds * 1e6
            out[(g, name)] = cls
    return out


def attention_pairs(model_name: str, gpu_name: str = "h200") -> dict[str, dict[str, float]]:
    """{row: ...} of FA2's split-KV pair as the model has it, per step (us): KV splits
    (``fa2_splits``), the split kernel's CTAs, the combine's CTAs (``fa2_combine_rows``), the
    model's split kernel and combine (``attention``, ``attention.combine``), the combine's chain
    (``fa2_combine_chain_s``: not in the step model), and the graph's gaps (``launch.graph`` a
    kernel, held in the classes' times: each kernel's time runs from its launch)."""
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.mapping.gpu import (
        fa2_combine_chain_s,
        fa2_combine_rows,
        fa2_decode_splits,
    )

    full, rows, *_, document = MODELS[model_name]
    model = load_spec(model_path(document), ModelSpec)
    gpu = load_gpu_node(f"hw_configs/{gpu_name}.yaml").gpu
    out = {}
    for name, tp, batch, kv in rows:
        sh = shard_shape(full, tp)
        bhm, splits = fa2_decode_splits(batch, sh["heads"], sh["kv_heads"], kv, sh["head_dim"], gpu)
        step = _model_step(model, gpu, tp, batch, kv)
        layers = sh["layers"]
        out[name] = {
            "splits": splits,
            "split_ctas": bhm * splits,
            "combine_ctas": -(-batch * sh["heads"] // fa2_combine_rows(sh["head_dim"]))
            if splits > 1
            else 0,
            "split_us": step.kernels.get("attention", 0.0) * 1e6,
            "combine_us": step.kernels.get("attention.combine", 0.0) * 1e6,
            "chain_us": fa2_combine_chain_s(splits, gpu) * 1e6 * layers if splits > 1 else 0.0,
            "launches": step.launches,
            "gaps_us": step.launches * gpu.launch_s("graph") * 1e6,
            "layers": layers,
        }
    return out


def model_launches(model_name: str, gpu_name: str = "h200") -> dict[str, dict[str, int]]:
    """{row: {class: kernels a step}} of the model's shard step (``simulate_gpu_step``'s kernels:
    the measured layer ``layers`` times, the embedding and the head once); each pays
    ``launch.graph`` in a graph, held in its class's time."""
    from rdusim.analysis.gpu.predict import MEASURED_LAYER, llama_shape
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.mapping.gpu import layer_kernels

    full, rows, *_, document = MODELS[model_name]
    model = load_spec(model_path(document), ModelSpec)
    gpu = load_gpu_node(f"hw_configs/{gpu_name}.yaml").gpu
    out = {}
    for name, tp, batch, kv in rows:
        shape = llama_shape(model, batch=batch, tokens=1, kv_len=kv, tp=tp)
        parts = [(list(MEASURED_LAYER), full["layers"]), (["embedding"], 1), (["lm_head"], 1)]
        counts: dict[str, int] = {}
        for names, times in parts:
            for k in layer_kernels(names, shape, gpu, phase="decode"):
                cls = "combine" if k.name.endswith(".combine") else _model_class(k.name)
                counts[cls] = counts.get(cls, 0) + k.launches * times
        out[name] = counts
    return out


#: the budget table's groups of classes
GROUPS = {
    "GEMMs": ("gemm_qkv", "gemm_o", "gemm_gate_up", "gemm_down", "lm_head"),
    "small kernels": ("rope", "kv_append", "rms_norm", "silu_mul", "residual_add", "other"),
}


def print_predictions(model_name: str = "llama-3.1-8b") -> int:
    full, _, _, _, run, _ = MODELS[model_name]
    pred = predict(["h100", "h200"], model_name)
    flag = "" if model_name == "llama-3.1-8b" else f" --model {model_name}"
    print(
        f"# benchmarks/gpu/tp_shard.py --predict{flag}: the model's shard step by kernel class"
    )
    print(
        f"# (us per step, {full['layers']} layers and the head; no all-reduce, no logits gather);"
        f" frozen before run {run}"
    )
    print("| gpu | row | step | " + " | ".join(CLASSES) + " |")
    print("|---|---|---:|" + "---:|" * len(CLASSES))
    for (g, name), cls in pred.items():
        print(
            f"| {g} | {name} | {cls['step']:.0f} | "
            + " | ".join(f"{cls.get(c, 0.0):.0f}" for c in CLASSES)
            + " |"
        )
    print()
    print("# FA2's split-KV pair and the graph's gaps, H200 (us per step; the classes above hold the")
    print("# gaps, launch.graph a kernel; the combine's chain is not in the step model: docs/gpu.md,")
    print("# \"FA2's split-KV combine\")")
    print(
        "| row | splits | split CTAs | combine CTAs | split kernel | combine | combine's chain |"
        " kernels | graph gaps |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, a in attention_pairs(model_name).items():
        print(
            f"| {name} | {a['splits']} | {a['split_ctas']} | {a['combine_ctas']} |"
            f" {a['split_us']:.0f} | {a['combine_us']:.0f} | {a['chain_us']:.0f} |"
            f" {a['launches']} | {a['gaps_us']:.0f} |"
        )
    return 0


GEMM_TAGS = ("gemm", "nvjet", "xmma", "cutlass", "sm90_")


def _gemm_class(gemms: int, in_half: int, attn_half: bool, layers: int) -> str:
    if gemms > 4 * layers:
        return "lm_head"
    if attn_half:
        return "gemm_qkv" if in_half == 1 else "gemm_o"
    return "gemm_gate_up" if in_half == 1 else "gemm_down"


def _elementwise_class(in_half: int, attn_half: bool, head: bool) -> str:
    if in_half == 0 or head:
        return "other"
    if attn_half:
        return "rope" if in_half == 1 else "residual_add"
    return "silu_mul" if in_half == 1 else "residual_add"


def classify(names: list[str], layers: int = 32) -> list[str]:
    """The model's class of each kernel of one replay, by name and by its place in the layer: an
    RMSNorm opens the attention half (odd norms) or the FFN half (even); the first GEMM of a half
    is QKV or gate-up, the second O or down; a split-K reduction goes with its GEMM; the
    elementwise kernels after QKV are RoPE, after gate-up SiLU * up, after O and down the
    residual adds; after the layers' 4 x ``layers`` GEMMs the next is the LM head."""
    out = []
    norms = gemms = in_half = 0
    last_gemm = "other"
    for n in names:
        low = n.lower()
        attn_half = norms % 2 == 1
        if "layer_norm" in low or "rms" in low:
            norms, in_half, cls = norms + 1, 0, "rms_norm"
        elif "flash" in low or "fmha" in low:
            cls = "attention"
        elif "reduce" in low and "splitk" in low:
            cls = last_gemm
        elif any(t in low for t in GEMM_TAGS):
            gemms, in_half = gemms + 1, in_half + 1
            cls = last_gemm = _gemm_class(gemms, in_half, attn_half, layers)
        elif "index_copy" in low or "index_elementwise" in low:
            cls = "kv_append"
        elif "indexselect" in low or "embedding" in low:
            cls = "other"
        else:
            cls = _elementwise_class(in_half, attn_half, gemms > 4 * layers)
        out.append(cls)
    return out


def _shard_step(M, model, batch: int, kv: int):  # pragma: no cover - needs a GPU  # noqa: N803
    """collectives.py's ``_tp_step`` (decode) without its all-reduces and logits gather."""
    import torch
    import torch.nn.functional as F

    s, device = model.s, model.embed.device
    ck = [
        torch.randn(batch, s.kv_heads, kv, s.head_dim, dtype=M.BF16, device=device)
        for _ in range(s.layers)
    ]
    cv = [torch.randn_like(c) for c in ck]
    tokens = torch.randint(0, s.vocab, (batch, 1), device=device)
    pos = torch.tensor([kv - 1], device=device)
    cos, sin = M.rope_tables(s, pos)

    def step():
        x = F.embedding(tokens, model.embed)
        for layer, k_cache, v_cache in zip(model.layers, ck, cv, strict=True):
            h = F.rms_norm(x, (s.hidden,), layer["norm1"], 1e-5)
            qkv = (
                F.linear(h, layer["wqkv"])
                .view(batch, 1, s.q_heads + 2 * s.kv_heads, s.head_dim)
                .transpose(1, 2)
            )
            q = model.rope(qkv[:, : s.q_heads], cos, sin)
            k = model.rope(qkv[:, s.q_heads : s.q_heads + s.kv_heads], cos, sin)
            v = qkv[:, s.q_heads + s.kv_heads :]
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            o = M.sdpa(q, k_cache, v_cache, False)
            x = x + F.linear(
                o.transpose(1, 2).reshape(batch, 1, s.q_heads * s.head_dim), layer["wo"]
            )
            h = F.rms_norm(x, (s.hidden,), layer["norm2"], 1e-5)
            gu = F.linear(h, layer["wgu"])
            x = x + F.linear(F.silu(gu[..., : s.ffn]) * gu[..., s.ffn :], layer["wd"])
        h = F.rms_norm(x[:, -1:], (s.hidden,), model.norm, 1e-5)
        return F.linear(h, model.lm_head)

    return step


def _profiled(
    torch, fn, calls: int = 3
) -> list[tuple[str, float, str, str]]:  # pragma: no cover - needs a GPU
    """(name, device us, grid, block) of every kernel of ``calls`` calls of ``fn``, in launch
    order; grid and block from the profiler's trace (blank where it does not match)."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    ev = sorted(
        (e.time_range.start, e.name, e.time_range.elapsed_us())
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    )
    shapes = [("", "")] * len(ev)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prof.export_chrome_trace(f"{tmp}/trace.json")
            with open(f"{tmp}/trace.json") as fh:
                trace = json.load(fh)
        kernels = sorted(
            (
                (e["ts"], e["name"], e.get("args", {}))
                for e in trace.get("traceEvents", [])
                if str(e.get("cat", "")).lower()
                in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
            ),
            key=lambda e: (e[0], e[1]),
        )
        differ = sum(k[1] != n for k, (_, n, _) in zip(kernels, ev, strict=False))
        if differ or len(kernels) != len(ev):
            print(f"  trace: {len(kernels)} kernels, {len(ev)} events, {differ} names differ")
        if len(kernels) == len(ev):  # both in start order
            shapes = [
                ("x".join(map(str, a.get("grid", []))), "x".join(map(str, a.get("block", []))))
                for _, _, a in kernels
            ]
    except Exception as exc:  # noqa: BLE001 - the shapes are extra; the times stand alone
        print(f"  no grid from the trace ({exc})", flush=True)
    return [(n, d, g, b) for (_, n, d), (g, b) in zip(ev, shapes, strict=True)]


def _model(torch, M, full: dict[str, int], tp: int, models: dict):  # pragma: no cover  # noqa: N803
    """The shard model of ``tp`` (one kept at a time: the 70B TP4 shard holds 35 GB)."""
    if tp not in models:
        models.clear()
        torch.cuda.empty_cache()
        sh = shard_shape(full, tp)
        shard = M.LlamaShape(
            layers=sh["layers"],
            hidden=sh["hidden"],
            q_heads=sh["heads"],
            kv_heads=sh["kv_heads"],
            head_dim=sh["head_dim"],
            ffn=sh["ffn"],
            vocab=sh["vocab"],
        )
        models[tp] = M.Llama(shard, torch.device("cuda"))
    return models[tp]


def measure(model_name: str = "llama-3.1-8b") -> int:  # pragma: no cover - needs a GPU
    """Every row's graph timed first, then every row profiled: after a profiler session Kineto
    leaves CUPTI attached (unless ``TEARDOWN_CUPTI=1``) and each later graph replay launched onto
    an idle GPU paid 0.25-0.66 us a kernel more (runs ab, ap, aq timed and profiled row by row, so
    only their first row was clean: docs/gpu.md, run at)."""
    import torch
    from torch.nn.attention import SDPBackend

    here = Path(__file__).resolve().parent
    for p in (here, here.parent / "benchmarks" / "gpu"):
        sys.path.insert(0, str(p))
    import measure as M  # noqa: N812, PLC0415

    full, rows, runs, tag, *_ = MODELS[model_name]
    out = Path(os.environ.get("OUT", "."))
    steps_fh = open(out / f"tpshard{tag}.csv", "w", newline="")  # noqa: SIM115
    steps = csv.writer(steps_fh)
    steps.writerow(
        ["row", "tp", "batch", "kv_len", "gpu", "graph_median_us", "graph_min_us", "reps"]
    )
    kern_fh = open(out / f"tpshard{tag}-kernels.csv", "w", newline="")  # noqa: SIM115
    kern = csv.writer(kern_fh)
    kern.writerow(["row", "replay", "index", "kernel", "device_us", "grid", "block"])
    gpu = torch.cuda.get_device_name()
    print(gpu, torch.__version__, flush=True)
    models: dict[int, object] = {}
    shapes = {name: (tp, batch, kv) for name, tp, batch, kv in rows}
    with torch.no_grad():
        for profiled in (False, True):
            for name, backend in runs:
                tp, batch, kv = shapes[name]
                M.SDPA_BACKENDS[:] = [SDPBackend.FLASH_ATTENTION] if backend == "flash" else []
                step = _shard_step(M, _model(torch, M, full, tp, models), batch, kv)
                g = M.capture(None, step)
                if not profiled:
                    times = [t * 1e6 for t in M.replay_times(g, GRAPH_REPS, warmup=3)]  # us
                    med = statistics.median(times)
                    steps.writerow(
                        [f"{name}:{backend}", tp, batch, kv, gpu, round(med, 1),
                         round(min(times), 1), GRAPH_REPS]
                    )
                    steps_fh.flush()
                    print(f"{name}:{backend}: graph {med:.1f} us (min {min(times):.1f})", flush=True)
                for mode, fn in (("graph", g.replay), ("eager", step)) if profiled else ():
                    ev = _profiled(torch, fn)
                    print(f"  {name}:{backend} {mode}: {len(ev)} kernels profiled", flush=True)
                    per = len(ev) // 3 or 1
                    for i, (kn, d, grid, block) in enumerate(ev):
                        kern.writerow(
                            [f"{name}:{backend}:{mode}", i // per, i % per, kn, round(d, 3), grid,
                             block]
                        )
                    kern_fh.flush()
                del g, step
                torch.cuda.empty_cache()
    steps_fh.close()
    kern_fh.close()
    sys.stdout.flush()
    os._exit(0)


def read_kernels(kernels_csv: str) -> dict[str, dict[int, list[tuple[int, str, float, str]]]]:
    """{row: {replay: [(index, kernel, device us, grid)]}} of a kernels CSV (gzipped or not)."""
    rows: dict[str, dict[int, list[tuple[int, str, float, str]]]] = {}
    opener = gzip.open if kernels_csv.endswith(".gz") else open  # run ap's is gzipped
    with opener(kernels_csv, "rt") as fh:
        for r in csv.DictReader(fh):
            rows.setdefault(r["row"], {}).setdefault(int(r["replay"]), []).append(
                (int(r["index"]), r["kernel"], float(r["device_us"]), r.get("grid") or "")
            )
    return rows


def compare(kernels_csv: str, steps_csv: str, model_name: str = "llama-3.1-8b") -> int:
    """Measured per class (median over the replays) against the frozen classes, H200."""
    layers = MODELS[model_name][0]["layers"]
    pred = predict(["h200", "h100"], model_name)
    rows = read_kernels(kernels_csv)
    graph = {}
    with open(steps_csv) as fh:
        for r in csv.DictReader(fh):
            graph[r["row"]] = float(r["graph_median_us"])
    print(
        "| row | class | kernels a step | measured (us) | H200 model (us) | error | H100 model (us) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for key, replays in rows.items():
        name = key.split(":")[0]
        per_class: dict[str, list[float]] = {}
        counts: dict[str, int] = {}
        for ks in replays.values():
            ks.sort()
            cls = classify([k[1] for k in ks], layers)
            tot: dict[str, float] = {}
            for c, (_, _, d, *_) in zip(cls, ks, strict=True):
                tot[c] = tot.get(c, 0.0) + d
            for c, v in tot.items():
                per_class.setdefault(c, []).append(v)
            counts = {c: cls.count(c) for c in set(cls)}
        p200, p100 = pred[("h200", name)], pred[("h100", name)]
        for c in sorted(per_class):
            m = statistics.median(per_class[c])
            e200, e100 = p200.get(c, 0.0), p100.get(c, 0.0)
            err = f"{(e200 / m - 1) * 100:+.0f}%" if m else ""
            print(
                f"| {key} | {c} | {counts.get(c, 0)} | {m:.0f} | {e200:.0f} | {err} | {e100:.0f} |"
            )
        total = statistics.median([sum(k[2] for k in ks) for ks in replays.values()])
        print(
            f"| {key} | kernels summed | | {total:.0f} | {p200['step']:.0f} | | {p100['step']:.0f} |"
        )
        run = ":".join(key.split(":")[:2])
        if run in graph:
            print(
                f"| {key} | graph step | | {graph[run]:.0f} | {p200['step']:.0f} | "
                f"{(p200['step'] / graph[run] - 1) * 100:+.0f}% | {p100['step']:.0f} |"
            )
    print()
    print_pairs(rows, graph, model_name, pred)
    print()
    print_budget(rows, graph, model_name, pred)
    return 0


def print_budget(
    rows: dict[str, dict[int, list[tuple]]],
    graph: dict[str, float],
    model_name: str,
    pred: dict[tuple[str, str], dict[str, float]],
) -> None:
    """Each graph row's step split into GEMMs, FA2's split kernel, its combine, the small kernels
    and the graph's gaps: measured (device time, medians over the replays; gaps = graph step minus
    the kernels' sum) against the model's (each class less its kernels' ``launch.graph``; the gaps
    are those), us a step."""
    from rdusim.hw.gpu import load_gpu_node

    layers = MODELS[model_name][0]["layers"]
    gap = load_gpu_node("hw_configs/h200.yaml").gpu.launch_s("graph") * 1e6
    launches = model_launches(model_name)
    pairs = attention_pairs(model_name)
    cols = ["GEMMs", "split kernel", "combine", "small kernels", "graph gaps", "step"]
    print("| row | " + " | ".join(f"{c}: measured / model" for c in cols) + " | step error |")
    print("|---|" + "---:|" * (len(cols) + 1))
    for key, replays in rows.items():
        name, *_, mode = key.split(":")
        run = ":".join(key.split(":")[:2])
        if mode != "graph" or name not in pairs or run not in graph:
            continue
        p, n, a = pred[("h200", name)], launches[name], pairs[name]
        model = {g: sum(p.get(c, 0.0) - n.get(c, 0) * gap for c in cs) for g, cs in GROUPS.items()}
        model["split kernel"] = a["split_us"] - n.get("attention", 0) * gap
        model["combine"] = a["combine_us"] - n.get("combine", 0) * gap
        model["graph gaps"] = sum(n.values()) * gap
        model["step"] = p["step"]
        per: dict[str, list[float]] = {}
        for ks in replays.values():
            ks.sort()
            tot = {c: 0.0 for c in cols}
            for c, k in zip(classify([k[1] for k in ks], layers), ks, strict=True):
                if c == "attention":
                    c = "combine" if "combine" in k[1].lower() else "split kernel"
                else:
                    c = next((g for g, cs in GROUPS.items() if c in cs), c)
                tot[c] += k[2]
            tot["graph gaps"] = graph[run] - sum(k[2] for k in ks)
            tot["step"] = graph[run]
            for c, v in tot.items():
                per.setdefault(c, []).append(v)
        meas = {c: statistics.median(v) for c, v in per.items()}
        print(
            f"| {key} | "
            + " | ".join(f"{meas[c]:.0f} / {model[c]:.0f}" for c in cols)
            + f" | {(model['step'] / meas['step'] - 1) * 100:+.1f}% |"
        )


#: the kernels of a class that launches several, in launch order (measure.py's forward; the model's
#: ``round_trips`` of ``rope``, ``kv_append`` and ``silu_mul`` list them in the same order):
#: rotate_half's negation and cat, x * cos, rotated * sin, the sum; for q, then for k
SLOT_TYPES = {
    "rope": ("neg q", "cat q", "mul q cos", "mul q sin", "add q",
             "neg k", "cat k", "mul k cos", "mul k sin", "add k"),
    "kv_append": ("index_copy k", "index_copy v"),
    "silu_mul": ("silu", "mul"),
}
#: PyTorch's non-vectorised elementwise path, ``elementwise_kernel<128, 4>`` (and
#: ``index_elementwise_kernel<128, 4>``): aten/src/ATen/native/cuda/CUDALoops.cuh,
#: ``launch_legacy_kernel`` gives ceil(N / 512) CTAs of 128 threads, and each thread runs
#: ``for i < 4: if idx < N: f(idx); idx += 128``, so a thread's chain is min(4, ceil(N / 128))
#: elements in a one-CTA grid (the model's ``RT_STRIDED`` / ``RT_INDEX`` charge all 4)
LEGACY_THREADS, LEGACY_ELEMENTS = 128, 4


def kernel_types(names: list[str], layers: int = 32) -> list[str]:
    """``class: type`` of each kernel of one replay: the class (``classify``); the type is the
    kernel's place among its class's kernels in a half layer (``SLOT_TYPES``), FA2's split
    kernel, combine or forward kernel, a GEMM or its split-K reduction, else the class."""
    out, slot = [], {}
    for n, cls in zip(names, classify(names, layers), strict=True):
        low = n.lower()
        if cls == "rms_norm":
            slot = {}
        i = slot.get(cls, 0)
        slot[cls] = i + 1
        if cls in SLOT_TYPES:
            kind = SLOT_TYPES[cls][i] if i < len(SLOT_TYPES[cls]) else f"#{i}"
        elif cls == "attention":
            kind = "combine" if "combine" in low else "split" if "splitkv" in low else "forward"
        elif "reduce" in low and "splitk" in low:
            kind = "split-K reduce"
        elif cls.startswith("gemm") or cls == "lm_head":
            kind = "GEMM"
        else:
            kind = "embedding" if cls == "other" else cls
        out.append(f"{cls}: {kind}")
    return out


def _launch_s(kernel, gpu) -> list[float]:
    """The model's device time of each launch ``kernel`` stands for (what the profiler times):
    alone, ``kernels_device_s``; a kernel of several launches split as the engine prices it,
    ``kernel_fixed`` and its own round trips each, the rest (its bytes) evenly."""
    from rdusim.analysis.gpu.predict import kernels_device_s

    total = kernels_device_s([kernel], gpu)
    if kernel.launches == 1:
        return [total]
    lat = gpu.l2_latency_s if kernel.resident else gpu.hbm_latency_s
    rest = (total - kernel.launches * gpu.kernel_fixed_s - sum(kernel.round_trips) * lat) / kernel.launches
    return [gpu.kernel_fixed_s + rt * lat + rest for rt in kernel.round_trips]


def model_types(
    model_name: str, gpu, points: list[tuple[int, int, int]]
) -> dict[tuple[int, int, int], dict[str, tuple[int, float, int]]]:
    """{(tp, batch, kv): {``class: type``: (kernels a step, us a step, round trips a kernel)}} of
    the model's shard step (``model_launches``'s parts: the measured layer ``layers`` times, the
    embedding and the head once), each launch at ``_launch_s``, typed as ``kernel_types`` types
    the measured kernels."""
    from rdusim.analysis.gpu.predict import MEASURED_LAYER, llama_shape
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.mapping.gpu import layer_kernels

    full, *_, document = MODELS[model_name]
    model = load_spec(model_path(document), ModelSpec)
    out = {}
    for tp, batch, kv in points:
        shape = llama_shape(model, batch=batch, tokens=1, kv_len=kv, tp=tp)
        parts = [(list(MEASURED_LAYER), full["layers"]), (["embedding"], 1), (["lm_head"], 1)]
        types: dict[str, tuple[int, float, int]] = {}
        for names, times in parts:
            for k in layer_kernels(names, shape, gpu, phase="decode"):
                cls = _model_class(k.name)
                for i, t in enumerate(_launch_s(k, gpu)):
                    if cls in SLOT_TYPES:
                        kind = SLOT_TYPES[cls][i]
                    elif cls == "attention":
                        kind = "combine" if k.name.endswith(".combine") else (
                            "split" if k.fixed == "fa2_split" or k.name.endswith(".split") else "forward")
                    elif cls.startswith("gemm") or cls == "lm_head":
                        kind = "split-K reduce" if k.queued else "GEMM"
                    else:
                        kind = "embedding" if cls == "other" else cls
                    key = f"{cls}: {kind}"
                    n, us, _ = types.get(key, (0, 0.0, 0))
                    rt = k.round_trips[i] if k.round_trips else 0
                    types[key] = (n + times, us + t * 1e6 * times, rt)
        out[(tp, batch, kv)] = types
    return out


def legacy_chain(label: str, tp: int, batch: int, model_name: str = "llama-3.1-8b-tp4") -> int | None:
    """Elements a thread runs one after another (``LEGACY_ELEMENTS`` at most) in the longest
    thread of the non-vectorised kernel ``label`` (rotate_half's negation and the products, the
    KV append's ``index_copy_``, SiLU and its product at more than one row); None for the others."""
    sh = shard_shape(MODELS[model_name][0], tp)
    hq, hkv, hd = sh["heads"], sh["kv_heads"], sh["head_dim"]
    kind = label.split(": ")[1]
    n = {
        "neg q": batch * hq * hd // 2, "neg k": batch * hkv * hd // 2,
        "mul q cos": batch * hq * hd, "mul q sin": batch * hq * hd,
        "mul k cos": batch * hkv * hd, "mul k sin": batch * hkv * hd,
        "index_copy k": batch * hkv * hd, "index_copy v": batch * hkv * hd,
    }.get(kind)
    if n is None and label.startswith("silu_mul") and batch > 1:
        n = batch * sh["ffn"]
    return None if n is None else min(LEGACY_ELEMENTS, -(-n // LEGACY_THREADS))


def measured_types(replays: dict[int, list[tuple]], layers: int) -> dict[str, tuple[int, float]]:
    """{``class: type``: (kernels a replay, us a step: median over the replays)} of one row."""
    per: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for ks in replays.values():
        ks.sort()
        tot: dict[str, float] = {}
        labels = kernel_types([k[1] for k in ks], layers)
        for label, k in zip(labels, ks, strict=True):
            tot[label] = tot.get(label, 0.0) + k[2]
        for label, v in tot.items():
            per.setdefault(label, []).append(v)
        counts = {label: labels.count(label) for label in tot}
    return {label: (counts[label], statistics.median(v)) for label, v in per.items()}


#: the kernel paths of ``print_types``'s summary, in order
PATHS = (
    "non-vectorised, chain < 4 elements",
    "non-vectorised, chain of 4",
    "cat (CatArrayBatchedCopy)",
    "vectorised (adds; SiLU * up at one row)",
    "RMSNorm",
    "embedding",
    "GEMM + split-K reduce",
    "FA2",
)


def _path(label: str, chain: int | None) -> str:
    """``PATHS``' entry of a ``class: type`` (``chain``: its ``legacy_chain``)."""
    cls, kind = label.split(": ")
    if chain is not None:
        return PATHS[0] if chain < LEGACY_ELEMENTS else PATHS[1]
    if kind.startswith("cat"):
        return PATHS[2]
    if cls in ("rope", "residual_add", "silu_mul"):
        return PATHS[3]
    if cls == "rms_norm":
        return PATHS[4]
    if cls == "other":
        return PATHS[5]
    return PATHS[7] if cls == "attention" else PATHS[6]


def norm_weight_s(width: int, gpu) -> float:
    """The candidate's extra time of one RMSNorm in a step (in the model since P12's adoption,
    ``GpuKernel.cold_round_trips``; this is its closed form, which run aw's analysis priced): its second pass
    (``rt_rms_norm``'s second half; PyTorch layer_norm_kernel.cu, ``vectorized_layer_norm_kernel_impl``
    loads ``X_vec[i]`` and ``gamma_vec[i]`` and stores ``Y_vec[i]`` before the next load) waits on
    the layer's weight, read once a step and so not in L2 (between two reads the step streams every
    other weight through it): each of those round trips at ``memory.hbm_latency`` in place of
    ``memory.l2_latency``."""
    from rdusim.mapping.gpu import rt_rms_norm

    return rt_rms_norm(width) // 2 * (gpu.hbm_latency_s - gpu.l2_latency_s)


#: in-step RMSNorm kernels already profiled: (GPU document, kernels CSV, its rows' width by row
#: name prefix); runs l and m profiled eager decode steps of four models (small_kernels.py), runs
#: aw and ap the graph shards of Llama-3.1-8B (TP4, TP2) and -70B (TP8, TP4)
NORM_FILES = (
    ("h100", "benchmarks/gpu/h100-20261125l-small-kernels.csv", "benchmarks/gpu/h100-20261125l-small.csv"),
    ("h200", "benchmarks/gpu/h200-20261125m-small-kernels.csv", "benchmarks/gpu/h200-20261125m-small.csv"),
    ("h200", "benchmarks/gpu/h200-20261128aw-tpshard8tp4-kernels.csv.gz", LLAMA_8B["hidden"]),
    ("h200", "benchmarks/gpu/h200-20261128ap-tpshard70-kernels.csv.gz", LLAMA_70B["hidden"]),
)


def print_norms() -> int:
    """Every profiled in-step RMSNorm (``NORM_FILES``: median device time a kernel, by step)
    against the model's (``layer_kernels``' ``rms_norm`` of that width, ``kernels_device_s``), its
    weight from DRAM (``cold_round_trips``), and the same kernel with its weight in L2 (the model
    before P12 adopted it; ``norm_weight_s`` less)."""
    from dataclasses import replace

    from rdusim.analysis.gpu.predict import kernels_device_s, row_extra
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.mapping.gpu import LayerShape, layer_kernels

    print("| GPU | step | width | kernels | measured (us a kernel) | weight in L2 (before P12) | error |"
          " model (weight from DRAM) | error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for gpu_name, kernels_csv, widths in NORM_FILES:
        gpu = load_gpu_node(f"hw_configs/{gpu_name}.yaml").gpu
        steps: dict[str, list[float]] = {}
        if isinstance(widths, int):  # a tp_shard.py run: its graph rows
            for key, replays in read_kernels(kernels_csv).items():
                if key.endswith(":graph"):
                    steps[key] = [k[2] for k in replays[0] if "layer_norm" in k[1]]
        else:  # small_kernels.py: the eager decode steps' kernels, their widths from the rows CSV
            with open(widths) as fh:
                width_of = {row_extra(r).get("family"): int(row_extra(r)["hidden"])
                            for r in csv.DictReader(fh) if "hidden" in row_extra(r)}
            with open(kernels_csv) as fh:
                for r in csv.DictReader(fh):
                    if "_decode_" in r["row"] and "layer_norm" in r["kernel"]:
                        steps.setdefault(r["row"], []).append(float(r["device_us"]))
        for key, times in steps.items():
            width = widths if isinstance(widths, int) else width_of[key.split("_decode_")[0]]
            shape = LayerShape(batch=1, tokens=1, kv_len=1, hidden=width, q_heads=1, kv_heads=1, head_dim=1,
                               ffn=1, vocab=1)
            norm = layer_kernels(["rms_norm"], shape, gpu, phase="decode")
            model = kernels_device_s(norm, gpu) * 1e6
            warm = kernels_device_s([replace(k, cold_round_trips=0) for k in norm], gpu) * 1e6
            m = statistics.median(times)
            print(f"| {gpu_name} | {key} | {width} | {len(times)} | {m:.2f} | {warm:.2f} | {(warm / m - 1) * 100:+.0f}% |"
                  f" {model:.2f} | {(model / m - 1) * 100:+.0f}% |")
    return 0


#: run ay's TP4 points that miss (docs/gpu.md, "Run ay"): the shard's kernels at each, for the
#: candidates' effect (no kernel profile at these points)
AY_POINTS = [(4, 2, 8192), (4, 4, 8192), (4, 16, 8192)]


def print_types(kernels_csv: str, model_name: str = "llama-3.1-8b-tp4") -> int:
    """Run aw's small-kernel residual by kernel type (issue 17, P12): each graph row's kernels
    typed (``kernel_types``), measured (median over the replays) against the model's launches of
    the same type (``model_types``, without ``launch.graph``), with the non-vectorised kernels'
    elements a thread (``legacy_chain``); measured - model a step by type at every row, and by
    kernel path (``PATHS``); two candidates' effect on the model step (``print_candidates``)."""
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node("hw_configs/h200.yaml").gpu
    points = {name: (tp, b, kv) for name, tp, b, kv in MODELS[model_name][1]}
    diff, count = _print_type_rows(read_kernels(kernels_csv), points, model_name, gpu)
    names = list(diff)
    print("measured - model, us a step, by type (classes in the order of the step):")
    print("| class: type | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    labels = sorted({lb for d in diff.values() for lb in d}, key=lambda lb: (CLASSES.index(lb.split(":")[0]), lb))
    groups = {"GEMMs": GROUPS["GEMMs"], "FA2": ("attention",), "small kernels": GROUPS["small kernels"]}
    for label in labels:
        print(f"| {label} | " + " | ".join(f"{diff[n].get(label, 0.0):+.0f}" for n in names) + " |")
    for g, cs in groups.items():
        print(f"| **{g}** | " + " | ".join(
            f"{sum(v for lb, v in diff[n].items() if lb.split(':')[0] in cs):+.0f}" for n in names) + " |")
    print()
    print("measured - model by kernel path, us a step (kernels a step; us a kernel):")
    print("| path | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    paths: dict[str, dict[str, list[float]]] = {}
    for n in names:
        tp, batch, _ = points[n]
        for label, v in diff[n].items():
            acc = paths.setdefault(_path(label, legacy_chain(label, tp, batch, model_name)), {})
            acc.setdefault(n, [0.0, 0])
            acc[n][0] += v
            acc[n][1] += count[n].get(label, 0)
    for path in PATHS:
        cells = []
        for n in names:
            v, k = paths.get(path, {}).get(n, (0.0, 0))
            cells.append(f"{v:+.0f} ({k}; {v / k:+.2f})" if k else "-")
        print(f"| {path} | " + " | ".join(cells) + " |")
    print()
    print_candidates({**points, **{f"ay_b{b}_l{kv}": (tp, b, kv) for tp, b, kv in AY_POINTS}}, model_name, gpu)
    return 0


def _print_type_rows(
    rows: dict[str, dict[int, list[tuple]]], points: dict[str, tuple[int, int, int]], model_name: str, gpu
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
    """``print_types``'s first table (every graph row's kernel types); returns measured - model
    (us a step) and the measured kernels a step, by row and type."""
    model = model_types(model_name, gpu, list(points.values()))
    layers = MODELS[model_name][0]["layers"]
    diff: dict[str, dict[str, float]] = {}
    count: dict[str, dict[str, int]] = {}
    print("| row | class: type | kernels a step (model) | measured a kernel (us) | model a kernel (us) |"
          " elements a thread | measured - model (us a step) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key, replays in rows.items():
        name, *_, mode = key.split(":")
        if mode != "graph" or name not in points:
            continue
        tp, batch, _ = points[name]
        meas, mod = measured_types(replays, layers), model[points[name]]
        diff[name] = {}
        count[name] = {label: n for label, (n, _) in meas.items()}
        for label in sorted(set(meas) | set(mod)):
            n, us = meas.get(label, (0, 0.0))
            mn, mus, _ = mod.get(label, (0, 0.0, 0))
            e = legacy_chain(label, tp, batch, model_name)
            diff[name][label] = us - mus
            print(f"| {name} | {label} | {n} ({mn}) | {us / n if n else 0:.2f} | {mus / mn if mn else 0:.2f} |"
                  f" {e if e is not None else ''} | {us - mus:+.0f} |")
    print()
    return diff, count


def print_candidates(points: dict[str, tuple[int, int, int]], model_name: str, gpu) -> None:
    """Two candidates' change of the model's shard step at ``points`` (us), neither in the model:
    ``efficiency.strided_stream`` at the H100's absolute rate, 1.81 TB/s of the H200's 4.8 (run
    ax: the strided kernels at 1.61-1.81 TB/s on the H200), and each non-vectorised kernel's chain
    at its elements a thread (``legacy_chain``, +1 for ``index_copy_``'s index) in place of
    ``RT_STRIDED`` / ``RT_INDEX``, at ``memory.l2_latency`` a round trip; and each RMSNorm's
    weight read from DRAM (``norm_weight_s``)."""
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import Gpu
    from rdusim.mapping.gpu import RT_INDEX

    spec = gpu.spec
    slow = Gpu(spec.model_copy(update={"efficiency": spec.efficiency.model_copy(
        update={"strided_stream": 1.81e12 / spec.memory.hbm_bytes_per_s})}))
    doc = load_spec(model_path(MODELS[model_name][5]), ModelSpec)
    print("candidates, model step change (us; the measured residual is measured - model above):")
    print("| row | tp, batch, keys | model step (us) | strided_stream 1.81 TB/s | chain at its elements a thread |"
          " RMSNorm's weight from DRAM |")
    print("|---|---|---:|---:|---:|---:|")
    for name, (tp, b, kv) in points.items():
        mod = model_types(model_name, gpu, [(tp, b, kv)])[(tp, b, kv)]
        chain = sum(
            n * ((e + (1 if "index_copy" in lb else 0)) - rt) * gpu.l2_latency_s * 1e6
            for lb, (n, _, rt) in mod.items()
            if (e := legacy_chain(lb, tp, b, model_name)) is not None and rt in (LEGACY_ELEMENTS, RT_INDEX)
        )
        now = _model_step(doc, gpu, tp, b, kv).seconds * 1e6
        d_slow = _model_step(doc, slow, tp, b, kv).seconds * 1e6 - now
        norms = sum(n for lb, (n, _, _) in mod.items() if lb.startswith("rms_norm"))
        print(f"| {name} | {tp}, {b}, {kv} | {now:.0f} | {d_slow:+.1f} | {chain:+.1f} |"
              f" {norms * norm_weight_s(doc.hidden, gpu) * 1e6:+.1f} |")


def _log_max_splits(kernel: str) -> int | None:
    """``Log_max_splits`` of FA2's combine kernel from its name (its template's second-last
    argument: ``flash_fwd_splitkv_combine_kernel<traits, kBlockM, Log_max_splits, Is_even_K>``)."""
    if "combine" not in kernel or "<" not in kernel:
        return None
    args = kernel.rsplit(">", 2)[-2].split(",") if kernel.count(">") >= 2 else []
    try:
        return int(args[-2])
    except (IndexError, ValueError):
        return None


def print_pairs(
    rows: dict[str, dict[int, list[tuple]]],
    graph: dict[str, float],
    model_name: str,
    pred: dict[tuple[str, str], dict[str, float]],
) -> None:
    """FA2's split-KV pair and the graph's gaps of each profiled graph row (medians over the
    replays, us a step) against the model's (``attention_pairs``)."""
    pairs = attention_pairs(model_name)
    print(
        "| row | splits (model; combine's Log_max_splits) | split kernel: grid (model CTAs) |"
        " split kernel (us) | model | combine: grid (model CTAs) | combine (us) | model |"
        " combine's chain | kernels summed | model | graph gaps | model |"
    )
    print("|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for key, replays in rows.items():
        name, *_, mode = key.split(":")
        run = ":".join(key.split(":")[:2])
        if mode != "graph" or name not in pairs or run not in graph:
            continue
        a = pairs[name]
        split, comb, total, grids = [], [], [], {}
        log_max = None
        for ks in replays.values():
            sp = cb = 0.0
            for k in ks:
                low = k[1].lower()
                if "flash" not in low and "fmha" not in low:
                    continue
                part = "combine" if "combine" in low else "split"
                grids.setdefault(part, k[3] if len(k) > 3 else "")
                if part == "combine":
                    cb += k[2]
                    log_max = _log_max_splits(k[1])
                else:
                    sp += k[2]
            split.append(sp)
            comb.append(cb)
            total.append(sum(k[2] for k in ks))
        kernels = statistics.median(total)
        model_kernels = pred[("h200", name)]["step"] - a["gaps_us"]
        log = f"; {log_max}" if log_max is not None else ""
        print(
            f"| {key} | {a['splits']}{log} | {grids.get('split', '')} ({a['split_ctas']}) |"
            f" {statistics.median(split):.0f} | {a['split_us']:.0f} |"
            f" {grids.get('combine') or '-'} ({a['combine_ctas']}) |"
            f" {statistics.median(comb):.0f} | {a['combine_us']:.0f} | {a['chain_us']:.0f} |"
            f" {kernels:.0f} | {model_kernels:.0f} | {graph[run] - kernels:.0f} |"
            f" {a['gaps_us']:.0f} |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predict", action="store_true")
    ap.add_argument("--compare", nargs=2, metavar=("KERNELS_CSV", "STEPS_CSV"))
    ap.add_argument("--types", metavar="KERNELS_CSV",
                    help="run aw's residual by kernel type (with --model llama-3.1-8b-tp4)")
    ap.add_argument("--model", choices=sorted(MODELS), default="llama-3.1-8b")
    ap.add_argument("--norms", action="store_true", help="every profiled in-step RMSNorm against the model")
    args = ap.parse_args(argv)
    if args.norms:
        return print_norms()
    if args.types:
        return print_types(args.types, args.model)
    if args.predict:
        return print_predictions(args.model)
    if args.compare:
        return compare(*args.compare, args.model)
    return measure(args.model)


if __name__ == "__main__":
    sys.exit(main())
