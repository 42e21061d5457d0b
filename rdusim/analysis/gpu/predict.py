"""GPU predictions: a GPU mapping's step time, the benchmark rows, and the calibration fit.

Owns: ``GpuStep``, ``simulate_gpu_step``, ``llama_shape``, ``predict_row``,
``fit_calibration``, ``fit_fa3_pipes``, ``fit_fa3_tile``, ``compare_rows``, ``simulate_gpu_mapping``. Imports: config, hw.gpu, model.policy, mapping.gpu,
sim.gpu.

``predict_row`` turns one row of ``benchmarks/gpu/*.csv`` into the library kernels that the
measurement ran and simulates them; ``fit_calibration`` reads only rows whose ``set`` is
``calibration`` (copy bandwidth and three GEMMs) and returns the three fitted constants.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scipy import optimize

from rdusim.config.loader import (
    Override,
    apply_overrides,
    load_spec,
    model_path,
    read_document,
    validate,
)
from rdusim.config.schema import (
    HOST_OPS,
    MAX_TOKENS,
    GpuMappingSpec,
    GpuSpec,
    KvPolicySpec,
    ModelSpec,
)
from rdusim.errors import ConfigError, SimulationError
from rdusim.hw.gpu import Gpu, GpuNode, load_gpu_node
from rdusim.hw.gpu_clock import SmClock
from rdusim.mapping.gpu import (
    BF16,
    GEMM_K_STEP,
    RT_CAT,
    RT_VECTORIZED,
    SPLIT_K_MIN_DEPTH,
    CtaGroup,
    GpuKernel,
    LayerShape,
    flash3_decode,
    flash3_prefill,
    flash_decode,
    flash_prefill,
    gemm,
    kascade_decode,
    layer_kernels,
    rms_norm,
    rt_index,
    rt_strided,
    streaming,
)
from rdusim.mapping.gpu_mla import (
    ffn_kernels,
    head_kernels,
    mla_attention_kernels,
    mla_kv_bytes_per_token,
    mla_prefill_attention_kernels,
    mla_shape,
    mla_weight_bytes,
    mtp_kernels,
)
from rdusim.model.policy import kascade_anchor_layers, kascade_topk, kv_length
from rdusim.sim.gpu import elapsed_s, simulate_gpu
from rdusim.summation import add_in_order

#: the decoder layer and head of ``benchmarks/gpu/measure.py``'s Llama model, in launch order
MEASURED_LAYER = ["rms_norm", "qkv_gemm", "rope", "kv_append", "attention", "o_gemm",
                  "residual_add", "rms_norm", "gate_up_gemm", "silu_mul", "down_gemm", "residual_add"]


def decoder_layer(model: ModelSpec) -> list[str]:
    """The library kernels of one of ``model``'s decoder layers as ``measure.py`` runs them:
    ``MEASURED_LAYER``, with the per-head QK norm after the QKV GEMM where the model has one
    (``attention.qk_norm``, Qwen3)."""
    layer = list(MEASURED_LAYER)
    if model.qk_norm:
        layer.insert(layer.index("qkv_gemm") + 1, "qk_norm")
    return layer


def qk_norm_mismatch(model: ModelSpec, layer: list[str]) -> str | None:
    """Why ``layer`` does not run ``model``'s attention (a QK norm missing or extra), or None."""
    if "qkv_gemm" not in layer or model.qk_norm == ("qk_norm" in layer):
        return None
    if model.qk_norm:
        return f"{model.name} normalises each query and key head (attention.qk_norm): add qk_norm after qkv_gemm"
    return f"{model.name} has no QK norm (attention.qk_norm is false): remove qk_norm"


@dataclass(frozen=True)
class GpuStep:
    """One forward step (a decode step or a prefill) on one GPU."""

    seconds: float
    kernels: dict[str, float]        # seconds per kernel name, summed over layers
    launches: int
    hbm_bytes: float
    flops: float


def llama_shape(model: ModelSpec, *, batch: int, tokens: int, kv_len: int, tp: int = 1,
                attention_kernel: str = "fa2") -> LayerShape:
    att = model.attention
    if att.kind != "gqa" or model.ffn.moe is not None:
        raise ValueError(f"{model.name}: the GPU library kernels cover GQA models with dense FFNs")
    return LayerShape(batch=batch, tokens=tokens, kv_len=kv_len, hidden=model.hidden,
                      q_heads=att.heads, kv_heads=att.kv_heads, head_dim=att.head_dim,
                      ffn=model.ffn.intermediate, vocab=model.vocab, tp=tp, attention_kernel=attention_kernel)


def simulate_gpu_step(model: ModelSpec, gpu: Gpu, *, layer: list[str], head: list[str], phase: str,
                      batch: int, seq_len: int, mode: str, tp: int = 1,
                      policy: KvPolicySpec | None = None, clock: SmClock | None = None,
                      attention_kernel: str = "fa2") -> GpuStep:
    """Simulate one step; identical layers are simulated once and multiplied (kernels run one
    at a time from an idle GPU, so a layer's time does not depend on its neighbours). With an
    SM-clock state (``clock``) every layer runs in order, and the state is left as the step ends.
    ``attention_kernel``: the prefill attention's library (``fa2`` or ``fa3``)."""
    policy = policy or KvPolicySpec()
    if why := qk_norm_mismatch(model, layer):
        raise ValueError(why)
    tokens = seq_len if phase == "prefill" else 1
    kept = seq_len if phase == "prefill" else kv_length(seq_len, policy)
    base = llama_shape(model, batch=batch, tokens=tokens, kv_len=kept, tp=tp, attention_kernel=attention_kernel)
    layer_types: dict[str, tuple[LayerShape, int]] = {"layer": (base, model.layers)}
    if policy.name == "kascade" and phase == "decode":
        anchors = kascade_anchor_layers(model.layers, policy)
        topk = kascade_topk(kept, policy)
        dense = _replace(base, topk=None)
        anchor = _replace(base, topk=topk, anchor=True)
        reuse = _replace(base, topk=topk)
        layer_types = {"dense": (dense, 1), "anchor": (anchor, len(anchors) - 1),
                       "reuse": (reuse, model.layers - len(anchors))}
    parts = [(layer_kernels(head[:1], base, gpu, phase=phase), 1),
             (layer_kernels(head[1:], base, gpu, phase=phase), 1)] if head else []
    for shape, count in layer_types.values():
        if count:
            kernels = layer_kernels(layer, shape, gpu, phase=phase)
            if shape.anchor is False and shape.topk is None and policy.name == "kascade" and phase == "decode":
                kernels += kascade_decode(shape.batch, shape.q_heads // tp, max(1, shape.kv_heads // tp),
                                          shape.kv_len, shape.head_dim, kascade_topk(kept, policy), gpu,
                                          anchor=True)[:3]  # layer 0 also publishes its top-k
            parts.append((kernels, count))
    return _run_parts(parts, gpu, mode, clock)


#: ``sustained_gpu_step``: steps back to back until one differs from the one before by less than this
SUSTAINED_TOL = 1e-3
SUSTAINED_MAX_STEPS = 200


def sustained_gpu_step(model: ModelSpec, gpu: Gpu, *, layer: list[str], head: list[str], phase: str,
                       batch: int, seq_len: int, mode: str, tp: int = 1,
                       policy: KvPolicySpec | None = None, attention_kernel: str = "fa2") -> GpuStep:
    """``simulate_gpu_step`` run back to back on one SM-clock state (``gpu.spec.clock``) from an
    idle GPU until a step's time moves by under ``SUSTAINED_TOL`` after at least five fall windows
    (the clock settled); that last step. A serving estimate for a GPU kept busy. A step that has
    not settled after ``SUSTAINED_MAX_STEPS`` is a ``SimulationError`` (no estimate)."""
    return _sustained(gpu, lambda clock: simulate_gpu_step(
        model, gpu, layer=layer, head=head, phase=phase, batch=batch, seq_len=seq_len, mode=mode, tp=tp,
        policy=policy, clock=clock, attention_kernel=attention_kernel))


def sustained_mla_step(model: ModelSpec, gpu: Gpu, **step: Any) -> GpuStep:
    """``simulate_mla_step`` (its keyword arguments ``step``) back to back on one SM-clock state, as
    ``sustained_gpu_step``: every layer in order (61 of DeepSeek-R1's), so a step takes longer to
    simulate than at full clock."""
    return _sustained(gpu, lambda clock: simulate_mla_step(model, gpu, clock=clock, **step))


def _sustained(gpu: Gpu, run: Callable[[SmClock], GpuStep]) -> GpuStep:
    """``run`` (one step on the clock state it is given) back to back from an idle GPU until a
    step's time moves by under ``SUSTAINED_TOL`` after at least five fall windows; that last step."""
    if gpu.spec.clock is None:
        raise ConfigError(f"{gpu.name}: clock: sustained needs the GPU document's clock section")
    clock = SmClock(gpu.spec.clock)
    last, spent = None, 0.0
    for _ in range(SUSTAINED_MAX_STEPS):
        result = run(clock)
        spent += result.seconds
        settled = last is not None and abs(result.seconds - last) <= SUSTAINED_TOL * result.seconds
        if settled and spent >= 5 * gpu.spec.clock.fall_window_s:
            return result
        last = result.seconds
    raise SimulationError(f"{gpu.name}: clock: sustained: the step did not settle within {SUSTAINED_MAX_STEPS} "
                          f"steps back to back ({spent:.3g} s; last two {last:.6g} s, {result.seconds:.6g} s, "
                          f"tolerance {SUSTAINED_TOL:g})")


def _replace(shape: LayerShape, **changes: object) -> LayerShape:
    return replace(shape, **changes)


def simulate_mla_step(model: ModelSpec, gpu: Gpu, *, batch: int, seq_len: int, mode: str, tp: int,
                      policy: KvPolicySpec, attention: str = "tp", mtp: bool = False,
                      phase: str = "decode", attention_kernel: str = "fa2", clock: SmClock | None = None) -> GpuStep:
    """A decode step (or, ``phase="prefill"``, the prefill of ``batch`` prompts of ``seq_len``
    tokens) of an MLA + MoE model on one GPU of a group of ``tp`` (``mapping.gpu_mla``; ``batch``
    is the group's, ``attention`` its layout, ``mtp`` one MTP draft token verified).

    A layer is its attention kernels then its FFN kernels, each run from an idle GPU, so the
    step is the sum over attention roles (dense, Kascade anchor, Kascade reuse) and FFN kinds
    (dense, MoE), each simulated once and multiplied by its layer count; with MTP, plus the MTP
    module drafting the next step's token. A prefill attends densely over the whole prompt (no
    policy compresses it here, as for GQA prefills) and runs no MTP module. ``clock``: an SM-clock
    state, advanced by the step (every layer then runs in order: ``_run_parts``)."""
    dense_ffn = model.ffn.first_dense_layers
    if phase == "prefill":
        base = mla_shape(model, batch, seq_len, tp, attention=attention, query_tokens=seq_len,
                         attention_kernel=attention_kernel)
        return _run_parts([(head_kernels(base, gpu, prefill=True), 1),
                           (mla_prefill_attention_kernels(base, gpu), model.layers),
                           (ffn_kernels(base, gpu, moe=False), dense_ffn),
                           (ffn_kernels(base, gpu, moe=True), model.layers - dense_ffn)], gpu, mode, clock)
    kept = kv_length(seq_len, policy)
    base = mla_shape(model, batch, kept, tp, attention=attention, query_tokens=2 if mtp else 1)
    parts: list[tuple[list[GpuKernel], int]] = [(head_kernels(base, gpu), 1)]
    if policy.name == "kascade":
        anchors = kascade_anchor_layers(model.layers, policy)
        topk = kascade_topk(kept, policy)
        parts += [(mla_attention_kernels(base, gpu), 1),
                  (mla_attention_kernels(_replace(base, topk=topk, anchor=True), gpu), len(anchors) - 1),
                  (mla_attention_kernels(_replace(base, topk=topk), gpu), model.layers - len(anchors))]
    else:
        parts.append((mla_attention_kernels(base, gpu), model.layers))
    parts += [(ffn_kernels(base, gpu, moe=False), dense_ffn),
              (ffn_kernels(base, gpu, moe=True), model.layers - dense_ffn)]
    if mtp:
        parts.append((mtp_kernels(base, gpu), model.mtp_layers))
    return _run_parts(parts, gpu, mode, clock)


def _run_parts(parts: list[tuple[list[GpuKernel], int]], gpu: Gpu, mode: str, clock: SmClock | None = None) -> GpuStep:
    """Graph and stream without a clock: each part simulated once from an idle GPU and multiplied
    by its count. Eager, or any mode with an SM-clock state (``clock``: the clock moves within
    the step, so no layer's time stands for another's): the whole step in one simulation, every
    layer in order. Eager: the host runs ahead of the GPU across layer boundaries (up to
    ``queue_depth`` kernels) and the GPU's backlog from one layer hides the host's work on the
    next. A layer simulated alone from an idle host and GPU makes the GPU wait for the host at
    every layer's start, which over-predicted balanced (middle-batch) eager steps by 40-115%
    against the per-op costs of their own host (run e, docs/gpu.md)."""
    if mode == "eager" or clock is not None:
        parts = [([k for kernels, count in parts for _ in range(count) for k in kernels], 1)]
    seconds, per_kernel, launches, nbytes, flops = 0.0, {}, 0, 0.0, 0.0
    for kernels, count in parts:
        if not kernels or not count:
            continue
        trace = simulate_gpu([(k, 0) for k in kernels], gpu, mode=mode, clock=clock)
        seconds += elapsed_s(trace) * count
        for record in trace.kernels:
            per_kernel[record.kernel] = per_kernel.get(record.kernel, 0.0) + (record.end_s - record.start_s) * count
        launches += sum(k.launches for k in kernels) * count
        nbytes += add_in_order(k.bytes for k in kernels if k.math != "nvlink") * count  # HBM, not NVLink
        flops += add_in_order(k.flops for k in kernels) * count
    return GpuStep(seconds, per_kernel, launches, nbytes, flops)


# --------------------------------------------------------------------- benchmark rows
LLAMA_8B = dict(layers=32, hidden=4096, vocab=128256, heads=32, kv_heads=8, head_dim=128, ffn=14336)


def _int(row: dict, key: str) -> int:
    return int(float(row[key]))


def row_kernels(row: dict, gpu: Gpu) -> list[GpuKernel]:
    """The library kernels one microbenchmark row of ``measure.py`` launched."""
    kind = row["kind"]
    if kind == "copy":
        return [streaming("copy", float(row["bytes"]), gpu)]
    if kind == "gemm":
        return gemm("gemm", _int(row, "m"), _int(row, "n"), _int(row, "k"), gpu)
    if kind == "rmsnorm":
        return [streaming("rms_norm", float(row["bytes"]), gpu, rows=_int(row, "m"))]
    if kind == "silu_mul":
        return [streaming("silu_mul", 5 * _int(row, "m") * _int(row, "n") * 2, gpu, launches=2,
                          strided=_int(row, "m") > 1)]
    if kind == "launch":
        return [streaming("tiny", 2 * 256 * 4, gpu, rows=1)]
    b, hq, hkv, hd = (_int(row, k) for k in ("batch", "q_heads", "kv_heads", "head_dim"))
    if kind in ("attn_prefill", "attn_prefill_l2", "attn_prefill_full"):
        causal = row["mode"] != "noncausal"
        return flash_prefill("attention", b, hq, hkv, _int(row, "seq_len"), hd, gpu, causal=causal)
    if kind == "fa3_prefill":  # run bn: FlashAttention-3's forward (fa3_points.py)
        return flash3_prefill("attention", b, hq, hkv, _int(row, "seq_len"), hd, gpu,
                              head_dim_v=int(row_extra(row).get("head_dim_v", hd)), causal=row["mode"] != "noncausal")
    if kind in ("attn_decode", "fa3_decode"):  # fa3_decode, run bt: FA3's decode call (fa3_points.DECODE_POINTS)
        build = flash3_decode if kind == "fa3_decode" else flash_decode
        return build("attention", b, hq, hkv, _int(row, "kv_len"), hd, gpu)
    if kind == "kascade":
        mode, kv_len = row["mode"], _int(row, "kv_len")
        if mode == "dense":
            return flash_decode("attention", b, hq, hkv, kv_len, hd, gpu)
        if mode in ("reuse", "anchor", "reuse_rows", "anchor_rows"):
            return kascade_decode(b, hq, hkv, kv_len, hd, _int(row, "top_k"), gpu, anchor=mode.startswith("anchor"))
    raise ValueError(f"no GPU model for benchmark row {row['name']!r} (kind {kind!r})")


def predict_row(row: dict, gpu: Gpu, model: ModelSpec | None = None) -> float | None:
    """Predicted seconds of one benchmark row, or None where rdusim has no model for it."""
    kind = row["kind"]
    if row["set"] == "hardware":
        return None  # a constant of the device (the model's input), not a prediction
    if kind in ("e2e_decode", "e2e_prefill"):
        if model is None:
            return None
        phase = "decode" if kind == "e2e_decode" else "prefill"
        seq = _int(row, "kv_len") if phase == "decode" else _int(row, "seq_len")
        step = simulate_gpu_step(model, gpu, layer=decoder_layer(model), head=["embedding", "lm_head"],
                                 phase=phase, batch=_int(row, "batch"), seq_len=seq, mode=row["mode"],
                                 attention_kernel=row_extra(row).get("attention_kernel", "fa2"))
        return step.seconds
    if kind == "kascade" and row["mode"].startswith("project"):
        return None  # the project's reference kernels are PyTorch op chains, not library kernels
    kernels = row_kernels(row, gpu)
    if kind == "launch":
        mode = row["mode"]
        n = 200
        trace = simulate_gpu([(kernels[0], 0)] * n, gpu, mode=mode)
        return elapsed_s(trace) / n
    return elapsed_s(simulate_gpu([(k, 0) for k in kernels], gpu, mode="stream"))


# ---------------------------------------------------------------------- calibration
def hbm_latency(rows: Iterable[dict]) -> float:
    """Dependent-load latency from the two pointer-chase rows (set ``hardware``): the slope
    of time against hops, so the launch cost cancels."""
    chase = sorted((int(r["n"]), float(r["median_us"]) * 1e-6) for r in rows
                   if r["set"] == "hardware" and r["kind"] == "latency")
    if len(chase) < 2:
        raise ValueError("the CSV has no pointer-chase rows (set=hardware, kind=latency)")
    (n0, t0), (n1, t1) = chase[0], chase[-1]
    return (t1 - t0) / (n1 - n0)


def fit_calibration(rows: Iterable[dict], spec: GpuSpec) -> dict[str, float]:
    """Fit ``hbm_stream`` and ``launch.stream`` to the copy rows of P10's CSV, and
    ``strided_stream`` to its largest ``silu_mul`` calibration row. Reads
    ``set == calibration`` rows only (and the ``hardware`` latency rows, a constant of the
    device). The GEMM constants come from ``fit_gemm`` (a ``sweep.py`` CSV's GEMM calibration
    subset); ``launch.pipeline``, now FlashAttention's fixed cost, from ``fit_pipeline`` (P10's fit).

    A copy is one wave of streaming CTAs: its time is launch + one DRAM round trip + bytes /
    bandwidth, so the least-squares slope gives the bandwidth and the intercept minus the
    measured latency gives the launch cost."""
    rows = list(rows)
    latency = hbm_latency(rows)
    calibration = [r for r in rows if r["set"] == "calibration"]
    copies = [(float(r["bytes"]), float(r["median_us"]) * 1e-6) for r in calibration if r["kind"] == "copy"]
    xs, ys = zip(*copies, strict=True)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = add_in_order((x - mx) * (y - my) for x, y in copies) / add_in_order((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    launch = intercept - latency
    fit = {"hbm_stream": 1.0 / slope / spec.memory.hbm_bytes_per_s, "launch_stream_s": launch,
           "hbm_latency_s": latency}
    # PyTorch's non-vectorised elementwise path: the largest SiLU-and-multiply row (two kernels on
    # strided halves of a [m, 2n] tensor, 5 m n bf16 elements moved, all SMs busy): time = two
    # launches + one DRAM round trip + bytes / (peak x strided_stream).
    strided = [r for r in calibration if r["kind"] == "silu_mul"]
    if strided:
        row = max(strided, key=lambda r: _int(r, "m"))
        nbytes = 5 * _int(row, "m") * _int(row, "n") * 2
        seconds = float(row["median_us"]) * 1e-6 - 2 * launch - latency
        fit["strided_stream"] = nbytes / seconds / spec.memory.hbm_bytes_per_s
    return fit


# ------------------------------------------- launch.pipeline: P10's fit, reproduced
def p10_gemm(m: int, n: int, k: int, gpu: Gpu) -> list[GpuKernel]:
    """P10's fixed-tile GEMM model, the model under which ``launch.pipeline`` was fitted (and
    nothing else uses): a 64x128 tile for m <= 64 else 128x256, split-K up to one wave (slices of
    at least ``SPLIT_K_MIN_DEPTH``), each operand read from HBM once, no L2 limit, no per-step
    cost. Kept so that ``fit_pipeline`` reproduces the constant P12 keeps for FlashAttention."""
    bm, bn = (64, 128) if m <= 64 else (128, 256)
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    splits = max(1, min(gpu.sms // tiles, k // SPLIT_K_MIN_DEPTH)) if tiles < gpu.sms else 1
    ctas = tiles * splits
    k_slice = math.ceil(k / splits)
    out = m * n * (4 * splits if splits > 1 else BF16)
    main = GpuKernel("gemm", (CtaGroup(ctas, ((m * k + n * k) * BF16 + out) / ctas, 2.0 * bm * bn * k_slice,
                                       math.ceil(k_slice / GEMM_K_STEP)),), ctas_per_sm=1, math="gemm")
    if splits == 1:
        return [main]
    return [main, streaming("gemm.splitk_reduce", m * n * (4 * splits + BF16), gpu)]


def fit_pipeline(rows: Iterable[dict], spec: GpuSpec) -> dict[str, float]:
    """``launch.pipeline`` as P10 fitted it, from P10's CSV's calibration rows: under P10's
    fixed-tile GEMM model (``p10_gemm``; GEMMs pay ``pipeline`` and no L2 or per-step cost), the
    tensor rate from the largest calibration GEMM (square8192) and the fixed cost from the
    skinniest (down_m16, 16 x 4096 x 14336: memory-bound, so the fixed cost shows), alternated
    four times, each by bisection; ``hbm_stream``, ``launch.stream`` and the latency from
    ``fit_calibration``. Returns the pipeline and P10's tensor rate (``p10_gemm_tensor``, which
    P12's GEMM model no longer uses)."""
    rows = list(rows)
    base = fit_calibration(rows, spec)
    gemms = [r for r in rows if r["set"] == "calibration" and r["kind"] == "gemm"]
    big = max(gemms, key=lambda r: float(r["flops"]))
    skinny = min(gemms, key=lambda r: float(r["m"]))

    def time(row: dict, tensor: float, pipeline_s: float) -> float:
        eff = spec.efficiency.model_copy(update={"hbm_stream": base["hbm_stream"], "gemm_tensor": tensor,
                                                 "gemm_stream": None, "gemm_flush_writeback": None,
                                                 "strided_stream": None})
        launch = spec.launch.model_copy(update={"stream_s": base["launch_stream_s"], "pipeline_s": pipeline_s,
                                                "gemm_pipeline_s": pipeline_s, "gemm_step_s": 0.0})
        memory = spec.memory.model_copy(update={"hbm_latency_s": base["hbm_latency_s"], "l2_bytes_per_s": None})
        gpu = Gpu(spec.model_copy(update={"efficiency": eff, "launch": launch, "memory": memory}))
        kernels = p10_gemm(_int(row, "m"), _int(row, "n"), _int(row, "k"), gpu)
        return elapsed_s(simulate_gpu([(k, 0) for k in kernels], gpu, mode="stream"))

    tensor, pipeline_s = 0.8, 0.0
    for _ in range(4):
        fixed = pipeline_s
        tensor = _bisect(lambda x, p=fixed: time(big, x, p), float(big["median_us"]) * 1e-6, 0.05, 1.0,
                         falling=True)
        rate = tensor
        pipeline_s = _bisect(lambda x, e=rate: time(skinny, e, x), float(skinny["median_us"]) * 1e-6, 0.0,
                             100e-6, falling=False)
    return {"pipeline_s": pipeline_s, "p10_gemm_tensor": tensor}


def _bisect(f: Callable[[float], float], target: float, lo: float, hi: float, *, falling: bool) -> float:
    """The x in [lo, hi] where the monotonic f(x) meets target (40 halvings)."""
    for _ in range(40):
        mid = (lo + hi) / 2
        above = f(mid) > target
        lo, hi = (mid, hi) if above == falling else (lo, mid)
    return (lo + hi) / 2


def compare_rows(rows: Iterable[dict], gpu: Gpu, model: ModelSpec | None) -> list[dict]:
    """Every row with its prediction and signed relative error (None where not modelled)."""
    out = []
    for row in rows:
        pred = predict_row(row, gpu, model)
        measured = float(row["median_us"]) * 1e-6
        err = None if pred is None else (pred - measured) / measured
        out.append({**row, "predicted_us": None if pred is None else pred * 1e6, "error": err})
    return out


def summary(compared: list[dict], kinds: tuple[str, ...], mode: str | None = None) -> dict[str, float]:
    errs = [abs(r["error"]) for r in compared if r["error"] is not None and r["kind"] in kinds
            and r["set"] == "prediction" and (mode is None or r["mode"] == mode)]
    if not errs:
        return {"n": 0, "median": math.nan, "worst": math.nan}
    return {"n": len(errs), "median": statistics.median(errs), "worst": max(errs)}


# ------------------------------------------------------------------- GPU mappings
@dataclass(frozen=True)
class GpuResult:
    """A GPU mapping simulated at one workload: time, throughput and memory of one GPU."""

    name: str
    hardware: str
    phase: str
    mode: str
    batch: int
    seq_len: int
    kv_len: int
    policy: str
    gpus: int
    tp: int
    step: GpuStep
    weight_bytes: float
    kv_bytes: float
    hbm_bytes: float
    max_batch: int
    accepted: float = 1.0            # tokens accepted per sequence per decode step (MTP)
    attention: str = "tp"

    @property
    def tokens_per_s(self) -> float:
        """Node throughput: each of gpus/tp replicas serves ``batch`` sequences."""
        replicas = self.gpus // self.tp
        tokens = self.batch * (self.seq_len if self.phase == "prefill" else self.accepted)
        return tokens * replicas / self.step.seconds


def model_bytes(model: ModelSpec) -> float:
    """bf16 weights of a dense GQA model (embedding and LM head counted separately)."""
    att = model.attention
    d, hd = model.hidden, att.head_dim
    per_layer = d * (att.heads + 2 * att.kv_heads) * hd + att.heads * hd * d + 3 * d * model.ffn.intermediate
    return 2.0 * (model.layers * per_layer + 2 * model.vocab * d)


def kv_bytes_per_token(model: ModelSpec) -> float:
    att = model.attention
    return 2.0 * model.layers * 2 * att.kv_heads * att.head_dim


def simulate_gpu_mapping(spec: GpuMappingSpec, model: ModelSpec, node: GpuNode, *, seq_len: int | None = None,
                         batch: int | None = None, policy: KvPolicySpec | None = None,
                         mode: str | None = None, check_fit: bool = True) -> GpuResult:
    """Simulate a ``gpu_mapping`` on a GPU node: one replica of ``tp`` GPUs, the others copies.

    ``check_fit``: a batch that does not fit HBM is a ConfigError with the numbers (off for a
    what-if, as the serving step tables run one: HBM is the request engine's business there).
    A rate so small (or a latency so large) that the engine passes its horizon is reported
    against the GPU document that gave it."""
    try:
        return _simulate_gpu_mapping(spec, model, node, seq_len=seq_len, batch=batch, policy=policy, mode=mode,
                                     check_fit=check_fit)
    except SimulationError as error:
        raise SimulationError(f"{node.source or node.name}: {error}") from None


def _simulate_gpu_mapping(spec: GpuMappingSpec, model: ModelSpec, node: GpuNode, *, seq_len: int | None,
                          batch: int | None, policy: KvPolicySpec | None, mode: str | None,
                          check_fit: bool) -> GpuResult:
    seq_len = seq_len or spec.workload.seq_len
    batch = batch or spec.workload.batch
    policy = policy or spec.kv_policy
    mode = mode or spec.launch
    node = replace(node, gpu=replace(node.gpu, all_reduce=spec.all_reduce_kernel))
    if spec.tp > node.gpus or node.gpus % spec.tp:
        raise ConfigError(f"{spec.name}: tp={spec.tp} must divide the node's {node.gpus} GPU(s)")
    if model.attention.kind == "mla":
        if spec.clock != "full" and spec.phase != "prefill":
            raise ConfigError(f"{spec.name}: clock: {spec.clock} covers MLA prefill only ({MLA_DECODE_CLOCK})")
        return _simulate_mla_mapping(spec, model, node, seq_len, batch, policy, mode, check_fit)
    kept = kept_tokens(spec, seq_len, policy)
    weights, per_seq, max_batch = _gqa_fit(spec, model, node, seq_len, batch if check_fit else 0, policy)
    run_step = sustained_gpu_step if spec.clock == "sustained" else simulate_gpu_step
    step = run_step(model, node.gpu, layer=spec.layer, head=spec.head, phase=spec.phase,
                    batch=batch, seq_len=seq_len, mode=mode, tp=spec.tp, policy=policy,
                    attention_kernel=spec.attention_kernel)
    return GpuResult(spec.name, node.name, spec.phase, mode, batch, seq_len, kept, policy.name, node.gpus,
                     spec.tp, step, weights, per_seq * batch, weights + per_seq * batch, max_batch)


def _simulate_mla_mapping(spec: GpuMappingSpec, model: ModelSpec, node: GpuNode, seq_len: int, batch: int,
                          policy: KvPolicySpec, mode: str, check_fit: bool) -> GpuResult:
    """An MLA + MoE replica of ``spec.tp`` GPUs: weights and KV per GPU from the layout
    (``gpu_mla``), the largest batch that fits, and one step (a decode step or a prefill) of one
    GPU (all GPUs do the same)."""
    mtp = spec.workload.accepted_tokens_per_step > 1
    kept = kept_tokens(spec, seq_len, policy)
    weights, per_seq, max_batch = _mla_fit(spec, model, node, seq_len, batch if check_fit else 0, policy)
    share = kv_groups(spec)
    run_step = sustained_mla_step if spec.clock == "sustained" else simulate_mla_step
    step = run_step(model, node.gpu, batch=batch, seq_len=seq_len, mode=mode, tp=spec.tp, policy=policy,
                    attention=spec.attention, mtp=mtp, phase=spec.phase, attention_kernel=spec.attention_kernel)
    held = math.ceil(batch / share)
    return GpuResult(spec.name, node.name, spec.phase, mode, batch, seq_len, kept, policy.name, node.gpus,
                     spec.tp, step, weights, per_seq * held, weights + per_seq * held, max_batch,
                     accepted=spec.workload.accepted_tokens_per_step, attention=spec.attention)


@dataclass(frozen=True)
class ReplicaFit:
    """One replica's HBM per GPU at a prompt length: what the weights and KV take, and what fits."""

    weights_bytes: float          # on each GPU
    kv_bytes_per_token: float     # of one sequence, on each GPU that holds its cache
    whole_kv_bytes_per_token: float  # of one sequence, one copy of every layer's cache
    max_batch: int                # sequences of the replica at the prompt length
    capacity_bytes: float         # HBM of one GPU


def replica_fit(spec: GpuMappingSpec, model: ModelSpec, node: GpuNode, seq_len: int,
                policy: KvPolicySpec | None = None) -> ReplicaFit:
    """HBM per GPU of one replica of the mapping at ``seq_len`` (the policy's kept KV): the same
    figures its simulation checks a batch against."""
    policy = policy or spec.kv_policy
    if model.attention.kind == "mla":
        weights, _, most = _mla_fit(spec, model, node, seq_len, 0, policy)
        whole = per_gpu = mla_kv_bytes_per_token(model, mtp=spec.workload.accepted_tokens_per_step > 1)
    else:
        weights, _, most = _gqa_fit(spec, model, node, seq_len, 0, policy)
        whole = kv_bytes_per_token(model)
        per_gpu = whole / spec.tp
    return ReplicaFit(weights, per_gpu, whole, most, node.gpu.hbm_capacity_bytes)


def kept_tokens(spec: GpuMappingSpec, seq_len: int, policy: KvPolicySpec) -> int:
    """KV tokens a sequence holds in the mapping's phase: the whole prompt at prefill (no policy
    compresses a GPU prefill here), the policy's kept length at decode."""
    return seq_len if spec.phase == "prefill" else kv_length(seq_len, policy)


def kv_groups(spec: GpuMappingSpec) -> int:
    """Groups of a replica's sequences whose caches sit on different GPUs: the replica's GPUs when
    attention is data parallel (each GPU its own sequences), else one (heads split over all)."""
    return spec.tp if spec.attention == "dp" else 1


def _gqa_fit(spec: GpuMappingSpec, model: ModelSpec, node: GpuNode, seq_len: int, batch: int,
             policy: KvPolicySpec) -> tuple[float, float, int]:
    """(weights, KV bytes per sequence, largest batch) per GPU of a GQA replica, or a ConfigError
    with the numbers when ``batch`` does not fit."""
    kept = kept_tokens(spec, seq_len, policy)
    weights = model_bytes(model) / spec.tp
    per_seq = kv_bytes_per_token(model) * kept / spec.tp
    free = node.gpu.hbm_capacity_bytes - weights
    max_batch = max(0, int(free // per_seq)) if per_seq else 0
    if batch > max_batch:
        raise ConfigError(
            f"{spec.name}: batch {batch} does not fit on {node.gpu.name}: weights {weights / 1e9:.1f} GB + "
            f"KV {batch} x {per_seq / 1e9:.3f} GB > HBM {node.gpu.hbm_capacity_bytes / 1e9:.0f} GB "
            f"(max batch {max_batch})")
    return weights, per_seq, max_batch


def _mla_fit(spec: GpuMappingSpec, model: ModelSpec, node: GpuNode, seq_len: int, batch: int,
             policy: KvPolicySpec) -> tuple[float, float, int]:
    """The same for an MLA + MoE replica (its layout puts weights and KV per GPU)."""
    mtp = spec.workload.accepted_tokens_per_step > 1
    weights = mla_weight_bytes(model, spec.tp, attention=spec.attention, mtp=mtp)
    kept = kept_tokens(spec, seq_len, policy)
    per_seq = mla_kv_bytes_per_token(model, mtp=mtp) * kept
    free = node.gpu.hbm_capacity_bytes - weights
    max_batch = max(0, int(free // per_seq)) * kv_groups(spec)
    if batch > max_batch:
        whole = mla_weight_bytes(model, 1) / 1e9
        raise ConfigError(
            f"{spec.name}: batch {batch} does not fit on {spec.tp} x {node.gpu.name}: {whole:.0f} GB of "
            f"{model.dtypes.weights} weights put {weights / 1e9:.1f} GB on each GPU (attention {spec.attention}), "
            f"leaving {max(0.0, free) / 1e9:.1f} GB of {node.gpu.hbm_capacity_bytes / 1e9:.0f} GB for KV at "
            f"{per_seq / 1e9:.3f} GB per sequence (max batch {max_batch})")
    return weights, per_seq, max_batch


def gpu_result_rows(result: GpuResult) -> list[dict]:
    """Per-kernel rows (seconds summed over layers, share of the step) for tables."""
    total = result.step.seconds
    return [{"kernel": k, "time_us": s * 1e6, "share": s / total}
            for k, s in sorted(result.step.kernels.items(), key=lambda kv: -kv[1])]


def load_gpu_mapping(path: str | Path, hw: str | Path | None = None,
                     overrides: list[Override] = (), *, check_fit: bool = True,
                     ) -> tuple[GpuMappingSpec, ModelSpec, GpuNode]:
    """A gpu_mapping document (``--set`` overrides applied) with its model and its (or
    ``hw``'s) GPU node; ``check_fit``: its own workload must fit the node's HBM (off when the
    caller runs it at other sizes, as compare-hw does)."""
    path = Path(path)
    document = apply_overrides(read_document(path), list(overrides))
    spec = validate(document, GpuMappingSpec)

    def where(*key: str) -> str:
        return document.where(key)

    model = load_spec(model_path(spec.model, path.parent, where=f"{where('model')}: model"), ModelSpec)
    node = load_gpu_node(hw, "--hw") if hw is not None else \
        load_gpu_node((path.parent / spec.hardware).resolve(), f"{where('hardware')}: hardware")

    # every rule that spans the mapping, its model and its node is checked here, where the
    # document's lines are known, and located at the key that the rule is about
    mla = model.attention.kind == "mla" and model.ffn.moe is not None
    gqa = model.attention.kind == "gqa" and model.ffn.moe is None
    if not (mla or gqa):
        ffn = "a mixture-of-experts" if model.ffn.moe is not None else "a dense"
        raise ConfigError(f"{where('model')}: model: {model.name} has {model.attention.kind.upper()} attention "
                          f"and {ffn} FFN, which no GPU library kernels here cover: GPU mappings take GQA "
                          "attention with a dense FFN (the layer list) or MLA attention with mixture-of-experts "
                          "(rdusim.mapping.gpu_mla)")
    limit, why = (model.max_context, f"{model.name}'s context") if model.max_context else (MAX_TOKENS, "MAX_TOKENS")
    if spec.workload.seq_len > limit:
        raise ConfigError(f"{where('workload', 'seq_len')}: workload.seq_len: {spec.workload.seq_len} tokens exceed "
                          f"{why} of {limit} tokens" + (" (max_position_embeddings)" if model.max_context else ""))
    if spec.tp > node.gpus or node.gpus % spec.tp:
        raise ConfigError(f"{where('tp')}: tp: {spec.tp} does not divide the {node.gpus} GPU(s) of {node.name}")
    _check_layer(spec, model, mla, where("layer"))
    if not mla and spec.attention != "tp":
        raise ConfigError(f"{where('attention')}: attention: {spec.attention!r} is for MLA + MoE models; "
                          f"{model.name} splits attention by heads (tp)")
    _check_clock(spec, model, node, where("clock"), hw)
    _check_attention_kernel(spec, mla, node, where("attention_kernel"), hw)
    if spec.all_reduce_kernel == "custom" and not node.gpu.has_custom_all_reduce:
        source = "--hw" if hw is not None else f"hardware: {spec.hardware}"
        raise ConfigError(f"{where('all_reduce_kernel')}: all_reduce_kernel: custom needs vLLM's custom all-reduce "
                          f"in the GPU document (nvlink.custom_all_reduce; {source}: {node.gpu.name} has none): "
                          "use all_reduce_kernel: nccl")
    accepted = spec.workload.accepted_tokens_per_step
    if accepted > 1 and (not mla or accepted > 1 + model.mtp_layers or spec.phase != "decode"):
        raise ConfigError(f"{where('workload', 'accepted_tokens_per_step')}: workload.accepted_tokens_per_step: "
                          f"{accepted:g} needs a decode mapping of a model with MTP modules, at most "
                          f"1 + mtp_layers ({1 + model.mtp_layers if mla else 1}) tokens per step")
    fit = _mla_fit if mla else _gqa_fit
    try:
        if check_fit:
            fit(spec, model, node, spec.workload.seq_len, spec.workload.batch, spec.kv_policy)
    except ConfigError as error:
        raise ConfigError(f"{where('workload', 'batch')}: workload.batch: "
                          f"{str(error).removeprefix(spec.name + ': ')}") from None
    return spec, model, node


def _check_layer(spec: GpuMappingSpec, model: ModelSpec, mla: bool, at: str) -> None:
    """``layer``: none for an MLA + MoE model; for a GQA model its decoder layer's kernels, with the QK norm
    exactly where the model has one."""
    if mla and spec.layer:
        raise ConfigError(f"{at}: layer: an MLA + MoE model takes its kernels from "
                          "rdusim.mapping.gpu_mla; remove the list (choose the layout with attention: tp|dp)")
    if not mla and not spec.layer:
        raise ConfigError(f"{at}: layer: a {model.attention.kind} model needs its decoder layer's library "
                          "kernels, e.g. [rms_norm, qkv_gemm, rope, kv_append, attention, o_gemm, ...]")
    if not mla and (why := qk_norm_mismatch(model, spec.layer)):
        raise ConfigError(f"{at}: layer: {why}")


#: why an MLA decode step runs at full clock only: the clock model prices FlashMLA's decode kernel
#: (wgmma at 2.2x FA2's tensor rate) by FA2's power anchors, which priced FA3 at about half the
#: clock where run bq measured 4-7% (docs/gpu.md, Run bq); FlashMLA's own power is not measured
MLA_DECODE_CLOCK = ("FlashMLA's power under the clock model is not measured; its class, FA2's anchors, put FA3, "
                    "a wgmma kernel like it, at about half the clock where run bq measured 4-7% slower")


def _check_clock(spec: GpuMappingSpec, model: ModelSpec, node: GpuNode, at: str, hw: str | Path | None) -> None:
    """``clock: sustained`` needs a GPU document (``hw``: from ``--hw``) with a ``clock`` section, and of
    an MLA model a prefill (``MLA_DECODE_CLOCK``)."""
    if spec.clock != "sustained":
        return
    source = "--hw" if hw is not None else f"hardware: {spec.hardware}"
    if model.attention.kind == "mla" and spec.phase != "prefill":
        raise ConfigError(f"{at}: clock: sustained covers an MLA model's prefill only; {model.name}'s decode "
                          f"runs FlashMLA ({MLA_DECODE_CLOCK}): use clock: full")
    if node.gpu.spec.clock is None:
        raise ConfigError(f"{at}: clock: sustained needs a clock section in the GPU document "
                          f"({source}: {node.gpu.name} has none)")


def _check_attention_kernel(spec: GpuMappingSpec, mla: bool, node: GpuNode, at: str, hw: str | Path | None) -> None:
    """``attention_kernel: fa3`` prices a prefill's attention and a GQA model's decode attention
    (``flash3_decode``, run bt), on a GPU whose document calibrates FlashAttention-3
    (``efficiency.fa3_pipe_loss``, ``launch.fa3_tile``: the Hopper documents); an MLA model's decode
    runs FlashMLA. Under Kascade the dense layers run FA3's decode and the sparse ones keep FA2's
    decode over the gathered keys (``kascade_decode``: its measured harness)."""
    if spec.attention_kernel != "fa3":
        return
    if spec.phase != "prefill" and mla:
        raise ConfigError(f"{at}: attention_kernel: fa3 prices prefill attention and a GQA model's decode; an MLA "
                          "model's decode attention is FlashMLA: use attention_kernel: fa2")
    if not node.gpu.has_fa3:
        source = "--hw" if hw is not None else f"hardware: {spec.hardware}"
        raise ConfigError(f"{at}: attention_kernel: fa3 needs FlashAttention-3's constants in the GPU document "
                          f"(efficiency.fa3_pipe_loss and launch.fa3_tile; {source}: {node.gpu.name} has none): "
                          "use attention_kernel: fa2")


def is_gpu_mapping(path: str | Path) -> bool:
    path = Path(path)
    return path.is_file() and read_document(path).data.get("kind") == "gpu_mapping"


# ------------------------------------------------------------------- GEMM calibration
#: the grid ``fit_gemm`` searches (each a constant of hw_configs/<gpu>.yaml)
GEMM_FIT_GRID = {
    "gemm_tensor": [0.76 + 0.02 * i for i in range(10)],
    "gemm_stream": [0.66 + 0.03 * i for i in range(10)],
    "gemm_flush_writeback": [0.1 * i for i in range(11)],
    "gemm_pipeline_s": [0.5e-6 * i for i in range(9)],
    "l2_bytes_per_s": [4e12 + 1e12 * i for i in range(13)],
    "gemm_step_s": [10e-9 * i for i in range(9)],
}


def gemm_spec(spec: GpuSpec, *, gemm_tensor: float, gemm_stream: float, gemm_flush_writeback: float,
              gemm_pipeline_s: float, l2_bytes_per_s: float, gemm_step_s: float) -> GpuSpec:
    """``spec`` with the six GEMM constants replaced."""
    eff = spec.efficiency.model_copy(update={"gemm_tensor": gemm_tensor, "gemm_stream": gemm_stream,
                                             "gemm_flush_writeback": gemm_flush_writeback})
    launch = spec.launch.model_copy(update={"gemm_pipeline_s": gemm_pipeline_s, "gemm_step_s": gemm_step_s})
    memory = spec.memory.model_copy(update={"l2_bytes_per_s": l2_bytes_per_s})
    return spec.model_copy(update={"efficiency": eff, "launch": launch, "memory": memory})


#: the GEMM calibration subset of a ``sweep.py`` CSV: Llama-3.1-8B's four layer GEMMs at TP 1 and 8,
#: m in {16, 256, 4096} (24 of 1452 shapes). sweep.py declared the TP-1 rows before measuring;
#: the TP-8 rows were added after the first fit, because TP-1 rows (all >= 23 us) leave the
#: fixed cost of a small kernel undetermined (docs/gpu.md, GEMM tile selection).
GEMM_CALIBRATION = {("llama3.1-8b", tp, m) for tp in (1, 8) for m in (16, 256, 4096)}


def row_extra(row: dict) -> dict[str, str]:
    """The ``extra`` column of a benchmark row (``key=value;...``) as a dict."""
    return dict(item.split("=", 1) for item in row.get("extra", "").split(";") if "=" in item)


def is_gemm_calibration(row: dict) -> bool:
    """A GEMM row of ``GEMM_CALIBRATION`` (the only GEMM rows ``fit_gemm`` reads)."""
    if row["kind"] != "gemm":
        return False
    extra = row_extra(row)
    if "family" not in extra:
        return row["set"] == "calibration"
    return (extra["family"], int(extra["tp"]), int(float(row["m"]))) in GEMM_CALIBRATION


def fit_gemm(rows: Iterable[dict], spec: GpuSpec) -> dict[str, float]:
    """Fit the GEMM model's six constants (tensor rate of a full wave, the operand stream's HBM
    share, the share of L2 the harness's flush leaves dirty that a GEMM timed alone writes back, the
    per-kernel prologue/epilogue, the per-step cost, the L2 panel bandwidth) to the ``calibration`` GEMM
    rows of a ``sweep.py`` CSV: the grid point (``GEMM_FIT_GRID``) with the least sum of squared
    log errors, refined by one pass over each constant's neighbours."""
    cal = [r for r in rows if is_gemm_calibration(r)]
    if not cal:
        raise ValueError("the CSV has no calibration GEMM rows")

    def loss(point: dict[str, float]) -> float:
        gpu = Gpu(gemm_spec(spec, **point))
        total = 0.0
        for r in cal:
            pred = elapsed_s(simulate_gpu([(k, 0) for k in row_kernels(r, gpu)], gpu, mode="stream"))
            total += math.log(pred / (float(r["median_us"]) * 1e-6)) ** 2
        return total

    best = {key: values[len(values) // 2] for key, values in GEMM_FIT_GRID.items()}
    best_loss = loss(best)
    for _ in range(4):  # coordinate descent over the grid
        for key, values in GEMM_FIT_GRID.items():
            for v in values:
                trial = {**best, key: v}
                value = loss(trial)
                if value < best_loss:
                    best, best_loss = trial, value
    return {**best, "loss": best_loss}


#: the FlashAttention-2 prefill calibration rows of the ``sweep.py`` CSVs of runs a and d: the
#: causal hd-128 GQA rows (32 x 8 x 128, Llama-3.1-8B's heads) at 16K and 32K tokens, where the
#: causal triangle's tail is small and K/V fit in L2 (16K is the point the FlashAttention-3
#: paper's FA2 figure, D.2, gives), and one row of each other FA2 tile at 32K, K/V in L2: 32 x 8 x
#: 64 (run a) and 8 x 1 x 256 (run d). Every other prefill row (other head shapes and lengths,
#: 4K-256K, K/V past L2, non-causal, held out, the H200) is a prediction.
ATTENTION_CALIBRATION = ("flash_prefill_h32x8x128_l16384", "flash_prefill_h32x8x128_l32768",
                         "flash_prefill_h32x8x64_l32768", "flash_l2_b1_h8x1x256_l32768")


def fit_attention(rows: Iterable[dict], spec: GpuSpec) -> dict[str, float]:
    """Fit ``efficiency.attention_tensor`` (FA2's ``mma.sync`` rate as a share of tensor peak) and
    ``efficiency.attention_overlap`` (the share of the shorter of its MMAs and its shared-memory
    operand reads that the SM overlaps; exponentials at ``compute.sfu_peak`` and operand reads at
    ``memory.shared_bandwidth`` beside them) to the ``ATTENTION_CALIBRATION`` rows, one row of each
    FA2 tile (hd 64, 128, 256) among them: a bounded search on the overlap to 0.01, each point with
    the tensor share (to 0.001) that minimises the sum of squared log errors. The overlap's
    minimiser lies at 0.5448, next to the rounding boundary: searched to 0.01 it stops at 0.5456
    and rounds to the shipped 0.55 (docs/gpu.md, "The two one-dimensional fits")."""
    cal = [r for r in rows if r["name"] in ATTENTION_CALIBRATION]
    if not cal:
        raise ValueError("the CSV has no attention calibration rows")

    def loss(eff: float, overlap: float) -> float:
        s = spec.model_copy(update={"efficiency": spec.efficiency.model_copy(
            update={"attention_tensor": eff, "attention_overlap": overlap})})
        gpu = Gpu(s)
        return add_in_order(math.log(predict_row(r, gpu) / (float(r["median_us"]) * 1e-6)) ** 2 for r in cal)

    def tensor_at(overlap: float) -> tuple[float, float]:
        eff = _argmin(lambda e: loss(e, overlap), 0.2, 1.0, 1e-3)
        return eff, loss(eff, overlap)

    overlap = round(_argmin(lambda o: tensor_at(o)[1], 0.0, 1.0, 1e-2), 2)
    eff = round(tensor_at(overlap)[0], 3)
    return {"attention_tensor": eff, "attention_overlap": overlap, "loss": loss(eff, overlap)}


#: ``benchmarks/gpu/g4-fa3-h100.csv``: the FlashAttention-3 paper's forward figures on an H100
#: SXM5 (G4 Fig. 5, ../shared/reference/hardware-and-models.md section D.2: batch x seqlen = 16K
#: tokens, hidden 2048, TFLOP/s = 4 s^2 d h, halved when causal): predictions, every row (the
#: paper's build, 2024; the model is calibrated on today's, runs bo and bn).
FA3_PUBLISHED_CSV = "g4-fa3-h100.csv"
#: run bo's Nsight Compute reading of FA3's pipes (``fa3_ncu_read.py``): ``efficiency.fa3_pipe_loss``
FA3_PIPES_TABLE = "h200-20261129bo-fa3-ncu.txt"
#: run bn's timed FA3 calls on an H200: ``launch.fa3_tile`` on its rows ``is_fa3_calibration`` picks
FA3_CALIBRATION_CSV = "h200-20261129bn-fa3.csv"


def fa3_published_s(row: dict) -> float:
    """The time a published FlashAttention-3 figure stands for: its FLOPs at its TFLOP/s."""
    s, hd, b, h = (_int(row, k) for k in ("seq_len", "head_dim", "batch", "q_heads"))
    return 4.0 * s * s * hd * h * b / (2 if row["mode"] == "causal" else 1) / (float(row["tflops"]) * 1e12)


def predict_fa3_row(row: dict, gpu: Gpu) -> float:
    """One published FlashAttention-3 figure's kernel on ``gpu``, timed back to back (``graph``:
    the paper's benchmark repeats each call with the next queued behind it)."""
    return elapsed_s(simulate_gpu([(k, 0) for k in row_kernels(row, gpu)], gpu, mode="graph"))


def is_fa3_calibration(row: dict) -> bool:
    """A timed FA3 call ``fit_fa3_tile`` reads: the FlashAttention-3 paper's shapes (batch x seqlen
    16K tokens, hidden 2048, one head a KV head, ``flash_attn_func``) at the two head dims whose
    kernels run the warpgroups' ping-pong (64 and 128), causal: run bn's 12 such rows."""
    extra = row_extra(row)
    hd = _int(row, "head_dim")
    return (row["kind"] == "fa3_prefill" and row["mode"] == "causal" and hd in (64, 128)
            and int(extra.get("head_dim_v", hd)) == hd and extra.get("api", "func") == "func"
            and row["q_heads"] == row["kv_heads"] and _int(row, "q_heads") * hd == 2048
            and _int(row, "batch") * _int(row, "seq_len") == 16384)


def fa3_pipe_ratio(head_dim: int, head_dim_v: int, gpu: Gpu) -> float:
    """rho of the pipe law (``Gpu.fa3_pipe_busy``) for FA3 at these head dims: the shorter over the
    longer of a score's exponential (one, at ``compute.sfu_peak``) and its MMAs (2 (d + dv) FLOPs
    at the tensor peak), from the document's peaks."""
    sfu = gpu.sfu_per_s
    if sfu is None:
        raise ValueError(f"{gpu.name}: the pipe law needs compute.sfu_peak")
    exp_s, mma_s = 1.0 / sfu, 2.0 * (head_dim + head_dim_v) / gpu.tensor_peak_flops_per_s()
    return min(exp_s, mma_s) / max(exp_s, mma_s)


def fit_fa3_pipes(readings: Iterable[dict], gpu: Gpu) -> dict[str, float]:
    """``efficiency.fa3_pipe_loss`` (to 0.01) from Nsight Compute readings of FA3's pipes
    (``measured.read_fa3_pipes``: each kernel's head dims and its tensor and XU pipes' busy
    shares): least squares of the bottleneck pipe's lost share, ``1 - max(tensor, XU)``, on
    ``rho^2`` through the origin (``fa3_pipe_ratio``). Timings play no part."""
    pts = [(fa3_pipe_ratio(r["head_dim"], r["head_dim_v"], gpu) ** 2, 1.0 - max(r["tensor"], r["xu"]))
           for r in readings]
    if not pts:
        raise ValueError("no FlashAttention-3 pipe readings")
    loss = add_in_order(x * y for x, y in pts) / add_in_order(x * x for x, _ in pts)
    return {"fa3_pipe_loss": round(loss, 2), "kernels": len(pts),
            "worst_points": max(abs(100 * (y - round(loss, 2) * x)) for x, y in pts)}


def fa3_spec(spec: GpuSpec, pipe_loss: float, tile_s: float) -> GpuSpec:
    """``spec`` with FlashAttention-3's two constants set (``efficiency.fa3_pipe_loss``, ``launch.fa3_tile``)."""
    return spec.model_copy(update={
        "efficiency": spec.efficiency.model_copy(update={"fa3_pipe_loss": pipe_loss}),
        "launch": spec.launch.model_copy(update={"fa3_tile_s": tile_s})})


def _measured_s(row: dict) -> float:
    return float(row["median_us"]) * 1e-6


def fa3_loss(rows: list[dict], spec: GpuSpec, pipe_loss: float, tile_s: float, *,
             time_s: Callable[[dict], float] = _measured_s,
             predict: Callable[[dict, Gpu], float] = predict_row) -> float:
    """Sum of squared log errors of ``rows`` at the two constants: each row's ``predict`` (by default
    a timed call's kernel, ``predict_row``) against its ``time_s`` (its median; a published figure:
    ``fa3_published_s`` with ``predict_fa3_row``)."""
    gpu = Gpu(fa3_spec(spec, pipe_loss, tile_s))
    return add_in_order(math.log(predict(r, gpu) / time_s(r)) ** 2 for r in rows)


def fit_fa3_tile(rows: list[dict], spec: GpuSpec, pipe_loss: float, **pair: Callable) -> dict[str, float]:
    """Fit FlashAttention-3's ``launch.fa3_tile`` (to 0.01 us) to ``rows`` at ``pipe_loss`` (the shipped
    fit: run bn's ``is_fa3_calibration`` rows at ``fit_fa3_pipes``' loss; ``pair``: ``time_s`` and
    ``predict`` as ``fa3_loss`` takes them), a bounded search minimising ``fa3_loss``. The MMAs run at
    ``gemm_tensor`` (not fitted)."""
    if not rows:
        raise ValueError("no FlashAttention-3 calibration rows")
    tile_us = round(_argmin(lambda t: fa3_loss(rows, spec, pipe_loss, t * 1e-6, **pair), 0.0, 5.0, 1e-3), 2)
    return {"fa3_tile_us": tile_us, "loss": fa3_loss(rows, spec, pipe_loss, tile_us * 1e-6, **pair)}


def _argmin(f: Callable[[float], float], lo: float, hi: float, tol: float) -> float:
    """The minimiser of a unimodal ``f`` on [lo, hi] to ``tol`` (bounded Brent,
    ``scipy.optimize.minimize_scalar``)."""
    return float(optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": tol}).x)


# ------------------------------------------------------------------- eager host dispatch
def host_costs(rows: Iterable[dict]) -> dict[str, dict[str, float] | int]:
    """The host's per-op dispatch costs (``sweep.py``'s ``dispatch`` rows, set ``host``: each op's
    loop timed with the GPU behind) and the launch-queue depth, as ``launch`` fields of a GPU
    document. The loop timed with the GPU idle is not a host cost (run dq: a call costs the same
    whatever the GPU's backlog; the idle loop adds its tail and its first call after a waited
    synchronize: docs/gpu.md, "Run dq")."""
    behind, depth = {}, None
    for r in rows:
        if r["set"] != "host":
            continue
        if r["kind"] == "dispatch" and r["mode"] == "behind":
            op = row_extra(r)["op"]
            if op in HOST_OPS:
                behind[op] = float(r["median_us"]) * 1e-6
        elif r["kind"] == "queue":
            depth = _int(r, "n")
    missing = [op for op in HOST_OPS if op not in behind]
    if missing:
        raise ValueError(f"the CSV has no dispatch rows for {', '.join(missing)}")
    return {"eager_ops": behind, "queue_depth": depth}


def _sites(rows: Iterable[dict]) -> list[dict]:
    """``sweep.py``'s site rows timed with the GPU behind (the idle pass is not a host cost: ``host_costs``)."""
    return [r for r in rows if r["set"] == "host" and r["kind"] in ("site", "site_paired") and r["mode"] == "behind"]


def site_host_costs(rows: Iterable[dict]) -> dict[str, dict[str, float]]:
    """Per-op host costs from ``sweep.py``'s ``site`` rows (every call of one decode layer and of
    the head timed alone, in a loop, with the forward's own operands and the GPU behind): each
    kind's mean over its call sites. Pass the rows of one (model, batch, round) to predict that
    round (or of one pair, ``site_paired``)."""
    acc: dict[str, list[float]] = {}
    for r in _sites(rows):
        acc.setdefault(row_extra(r)["op"], []).append(float(r["median_us"]) * 1e-6)
    missing = [op for op in HOST_OPS if op not in acc]
    if missing:
        raise ValueError(f"no site rows for {', '.join(missing)}")
    return {"eager_ops": {op: add_in_order(v) / len(v) for op, v in acc.items()}}


def sequence_pairs(rows: Iterable[dict]) -> list[tuple[float, float]]:
    """(one decode layer's calls in forward order, the same calls' loops), seconds a layer, one pair per
    (model, batch, KV, round) of ``sweep.py``'s ``eager_rounds`` (its ``site_sequence`` row and the
    round's layer sites, GPU behind)."""
    rows = list(rows)
    loops: dict[tuple, float] = {}
    for r in _sites(rows):
        e = row_extra(r)
        if e.get("where") == "layer":
            key = (e["family"], r["batch"], r["kv_len"], e.get("round"))
            loops[key] = loops.get(key, 0.0) + float(r["median_us"]) * 1e-6
    out = []
    for r in rows:
        if r["set"] == "host" and r["kind"] == "site_sequence":
            e = row_extra(r)
            out.append((float(r["median_us"]) * 1e-6, loops[(e["family"], r["batch"], r["kv_len"], e.get("round"))]))
    return out


def sequence_ratio(pairs: Iterable[tuple[float, float]]) -> float:
    """``launch.eager_sequence`` from (sequence, loops) pairs of one run: the median of sequence / loops."""
    ratios = [seq / loop for seq, loop in pairs]
    if not ratios:
        raise ValueError("no (sequence, loop) pairs")
    return statistics.median(ratios)


def pooled_host_costs(runs: dict[str, list[dict]]) -> dict:
    """A GPU document's eager host (``launch.eager_ops``, ``eager_sequence``, ``queue_depth``) from
    several runs of ``sweep.py``'s site microbenchmark on hosts of one kind, never from e2e rows.

    Per run (``runs``: name -> its CSV rows), each (model, batch, KV, round or pair) group's
    ``site_host_costs``, then the run's median per op; the document's cost is the median over
    runs. ``eager_sequence``: the median over the runs that timed a layer in sequence
    (``sequence_pairs``) of each run's ``sequence_ratio`` (None where none did). ``queue_depth`` is
    the median of the runs' ``queue`` rows. Also returns ``runs``: each run's per-op medians (the
    spread the median hides), its group count and its sequence ratio."""
    per_run: dict[str, dict] = {}
    for name, rows in runs.items():
        groups: dict[tuple, list[dict]] = {}
        for r in _sites(rows):
            e = row_extra(r)
            groups.setdefault((e["family"], r["batch"], r["kv_len"], e.get("round", e.get("pair"))), []).append(r)
        if not groups:
            continue
        costs = [site_host_costs(g) for g in groups.values()]
        pairs = sequence_pairs(rows)
        per_run[name] = {
            "groups": len(costs),
            "eager_sequence": sequence_ratio(pairs) if pairs else None,
            "eager_ops": {op: statistics.median(c["eager_ops"][op] for c in costs) for op in HOST_OPS}}
    if not per_run:
        raise ValueError("no site rows in the runs given")
    depths = [_int(r, "n") for rows in runs.values() for r in rows if r["set"] == "host" and r["kind"] == "queue"]
    sequences = [r["eager_sequence"] for r in per_run.values() if r["eager_sequence"] is not None]
    return {"eager_ops": {op: statistics.median(r["eager_ops"][op] for r in per_run.values()) for op in HOST_OPS},
            "eager_sequence": statistics.median(sequences) if sequences else None,
            "queue_depth": int(statistics.median(depths)) if depths else None,
            "runs": per_run}


def queued_kernel_excess(site_rows: Iterable[dict], small_rows: Iterable[dict]) -> list[float]:
    """Seconds a small kernel run from the host's launch queue costs beyond the same kernel inside a
    CUDA graph, one value per (model, batch, site) that both microbenchmarks ran.

    Queued: ``sweep.py``'s ``site_paired`` rows, GPU behind (a site's 10 calls queued behind a sleep
    kernel and run back to back once it ends, CUDA events around them: ``gpu_us`` per call, the
    median over pairs), less the events' own share (the median ``gpu_us`` of the sites that launch
    no kernel: views, slices). Graph: ``small_kernels.py``'s ``sk_site`` rows (the same call, its
    forward operands, 64 calls captured in one graph: ``median_us`` per call)."""
    graph: dict[tuple[str, int, int], float] = {}
    for r in small_rows:
        if r["kind"] == "sk_site":  # name: {family}_b{batch}_site{index}_{op}
            fam, rest = r["name"].split("_b", 1)
            batch, site = rest.split("_site", 1)
            graph[(fam, int(batch), int(site.split("_", 1)[0]))] = float(r["median_us"]) * 1e-6
    queued: dict[tuple[str, int, int], list[float]] = {}
    empty: dict[tuple[str, int], list[float]] = {}
    for r in site_rows:
        if r["kind"] != "site_paired" or r["mode"] != "behind":
            continue
        e = row_extra(r)
        gpu = float(e["gpu_us"]) * 1e-6
        if e["op"] in ("view", "transpose", "slice", "reshape_view"):  # no kernel: the events alone
            empty.setdefault((e["family"], _int(r, "batch")), []).append(gpu)
        elif e["where"] == "layer":
            queued.setdefault((e["family"], _int(r, "batch"), int(e["site"])), []).append(gpu)
    return [statistics.median(v) - statistics.median(empty[key[:2]]) - graph[key]
            for key, v in sorted(queued.items()) if key in graph and key[:2] in empty]


def eager_gap(runs: dict[str, list[dict]], small_rows: list[dict], graph_s: float) -> dict:
    """A GPU document's ``launch.eager_gap``: the per-kernel gap of an eager step's GPU, which runs
    its kernels from the host's launch queue, as ``graph_s`` (``launch.graph``) is a graph's, plus
    what a queued kernel costs beyond a graph's (``queued_kernel_excess``, pooled over ``runs``,
    name -> its ``sweep.py`` CSV rows). Never from an end-to-end row. Also returns each run's
    median excess and count (``runs``)."""
    per_run = {name: queued_kernel_excess(rows, small_rows) for name, rows in runs.items()}
    pooled = [x for v in per_run.values() for x in v]
    if not pooled:
        raise ValueError("no site of the runs given was also timed in a graph (small_kernels.py sk_site)")
    return {"eager_gap": graph_s + statistics.median(pooled), "excess": statistics.median(pooled),
            "runs": {name: (statistics.median(v), len(v)) for name, v in per_run.items() if v}}


def with_host(spec: GpuSpec, rows: Iterable[dict]) -> GpuSpec:
    """``spec`` whose eager host is the one measured in ``rows`` (the same host as their e2e rows)."""
    launch = spec.launch.model_copy(update=host_costs(rows))
    return spec.model_copy(update={"launch": launch})


def sweep_model(row: dict, base: ModelSpec) -> ModelSpec:
    """The Llama-shaped model a ``sweep.py`` e2e row ran (its shape from the row's columns); a row
    whose extra names no family ran the harness's default model, ``base`` (run bt's steps)."""
    extra = row_extra(row)
    if "family" not in extra:
        return base
    att = base.attention.model_copy(update={"heads": _int(row, "q_heads"), "kv_heads": _int(row, "kv_heads"),
                                            "head_dim": _int(row, "head_dim"),
                                            "qk_norm": extra.get("qk_norm", "0") == "1"})
    ffn = base.ffn.model_copy(update={"intermediate": int(extra["ffn"])})
    layers = int(extra["layers"])
    ffn = ffn.model_copy(update={"first_dense_layers": layers})
    return base.model_copy(update={"name": extra["family"], "layers": layers, "hidden": int(extra["hidden"]),
                                   "vocab": int(extra["vocab"]), "attention": att, "ffn": ffn})


# --------------------------------------------------------------- small kernels (run l)
#: the calibration rows of ``benchmarks/gpu/small_kernels.py`` for the small-kernel floor
#: (``launch.kernel_fixed``, ``memory.l2_latency``), named before any prediction was compared:
#: every kernel-launching call of Llama-3.1-8B's decode layer at batch 1 and RMSNorm of one row at
#: each width. Every other ``sk_*`` row (three more models, batch 16 and 64, 4-4096 rows, the size
#: sweep) is predicted.
SMALL_CALIBRATION_PREFIXES = ("llama3.1-8b_b1_site", "rmsnorm_1x")


def micro_device_us(kernel_rows: Iterable[dict]) -> dict[str, float]:
    """Device microseconds of one call of each ``small_kernels.py`` row: the profiled kernels of
    its 24 calls (the sleep kernel that queued them left out), summed per call."""
    out: dict[str, float] = {}
    for k in kernel_rows:
        if "spin_kernel" in k["kernel"]:
            continue
        out[k["row"]] = out.get(k["row"], 0.0) + float(k["device_us"]) * int(k["calls"]) / 24
    return out


def micro_kernels(row: dict, gpu: Gpu) -> list[GpuKernel]:
    """The kernels one ``small_kernels.py`` row ran (FA2 decode: the main kernel and any combine)."""
    if row["kind"] == "sk_fa2":
        return flash_decode("attention", _int(row, "batch"), _int(row, "q_heads"), _int(row, "kv_heads"),
                            _int(row, "kv_len"), _int(row, "head_dim"), gpu)
    kernel = micro_kernel(row, gpu)
    return [] if kernel is None else [kernel]


def _warm_norm(name: str, rows: int, width: int, gpu: Gpu) -> GpuKernel:
    """A step's RMSNorm (``rms_norm``) as a microbenchmark times it, repeated alone: its weight stays in L2."""
    return replace(rms_norm(name, rows, width, gpu), cold_round_trips=0)


def micro_kernel(row: dict, gpu: Gpu) -> GpuKernel | None:
    """The kernel one ``small_kernels.py`` row ran, as the model builds it (its round trips by
    kernel class, its bytes), or None for rows the small-kernel model does not cover."""
    kind, extra = row["kind"], row_extra(row)
    if kind == "sk_rmsnorm":
        rows, width = _int(row, "m"), _int(row, "n")
        return _warm_norm("rms_norm", rows, width, gpu)
    if kind in ("sk_copy", "sk_add", "sk_neg_strided"):
        strided = kind == "sk_neg_strided"
        # the negation reads and writes N 2-byte elements: 4 N bytes of traffic
        return streaming(kind, float(row["bytes"]), gpu, strided=strided,
                         round_trips=(rt_strided(int(row["bytes"]) // 4) if strided else RT_VECTORIZED,),
                         resident=True)
    if kind != "sk_site":
        return None
    op, batch = row["mode"], _int(row, "batch")
    hidden, hq, hkv, hd = int(extra["hidden"]), _int(row, "q_heads"), _int(row, "kv_heads"), _int(row, "head_dim")
    ffn = int(extra["ffn"])
    site = int(row["name"].split("_site")[1].split("_")[0])
    if op == "rms_norm":
        return _warm_norm(op, batch, hidden, gpu)
    if op == "index_copy":
        return streaming(op, 2 * batch * hkv * hd * BF16, gpu, round_trips=(rt_index(batch * hkv * hd),),
                         resident=True)
    rope_heads = hq if site < 13 else hkv  # the q half of the rotary sites, then the k half
    rope = 3 * batch * rope_heads * hd * BF16
    if op in ("elementwise_neg", "cat"):
        return streaming(op, rope * (2 / 3 if op == "elementwise_neg" else 1), gpu, strided=True,
                         round_trips=(RT_CAT if op == "cat" else rt_strided(batch * rope_heads * hd // 2),),
                         resident=True)
    if op == "elementwise_mul" and site < 24:  # the rotary products on strided views
        return streaming(op, rope, gpu, strided=True, round_trips=(rt_strided(batch * rope_heads * hd),),
                         resident=True)
    if op == "elementwise_add":
        nbytes = rope if site < 24 else 3 * batch * hidden * BF16
        return streaming(op, nbytes, gpu, round_trips=(RT_VECTORIZED,), resident=True)
    if op in ("silu", "elementwise_mul"):  # the FFN's halves: strided views unless one row
        nbytes = (2 if op == "silu" else 3) * batch * ffn * BF16
        return streaming(op, nbytes, gpu, strided=batch > 1,
                         round_trips=(rt_strided(batch * ffn) if batch > 1 else RT_VECTORIZED,), resident=True)
    return None


def micro_device_s(row: dict, gpu: Gpu) -> float | None:
    """The model's device time of one ``small_kernels.py`` row's kernel: its time in a graph less
    the graph's per-kernel launch (``launch.graph``), i.e. what the profiler times."""
    kernels = micro_kernels(row, gpu)
    if not kernels:
        return None
    return kernels_device_s(kernels, gpu)


def kernels_device_s(kernels: list[GpuKernel], gpu: Gpu) -> float:
    """The model's device time of ``kernels`` run back to back: their time in a graph less the
    graph's per-kernel launch (``launch.graph``), i.e. what the profiler times."""
    graph = elapsed_s(simulate_gpu([(k, 0) for k in kernels], gpu, mode="graph"))
    return graph - sum(k.launches for k in kernels) * gpu.launch_s("graph")


def fit_small_kernels(rows: Iterable[dict], device_us: dict[str, float], spec: GpuSpec) -> dict[str, float]:
    """Fit ``launch.kernel_fixed`` and ``memory.l2_latency`` to the ``SMALL_CALIBRATION_PREFIXES``
    rows' profiled device times: a kernel's device time is linear in the two (``kernel_fixed``
    once, ``l2_latency`` once per dependent round trip, plus its bytes), so least squares."""
    cal = [r for r in rows if r["name"].startswith(SMALL_CALIBRATION_PREFIXES) and r["name"] in device_us]
    if not cal:
        raise ValueError("the CSV has no small-kernel calibration rows")

    def with_consts(fixed: float, lat: float) -> Gpu:
        launch = spec.launch.model_copy(update={"kernel_fixed_s": fixed})
        memory = spec.memory.model_copy(update={"l2_latency_s": lat})
        return Gpu(spec.model_copy(update={"launch": launch, "memory": memory}))

    base, g_fixed, g_lat = with_consts(0.0, 0.0), with_consts(1e-6, 0.0), with_consts(0.0, 1e-6)
    a11 = a12 = a22 = b1 = b2 = 0.0
    for r in cal:
        b0 = micro_device_s(r, base)
        x1, x2 = (micro_device_s(r, g_fixed) - b0) / 1e-6, (micro_device_s(r, g_lat) - b0) / 1e-6
        y = device_us[r["name"]] * 1e-6 - b0
        a11, a12, a22, b1, b2 = a11 + x1 * x1, a12 + x1 * x2, a22 + x2 * x2, b1 + x1 * y, b2 + x2 * y
    det = a11 * a22 - a12 * a12
    fixed, lat = (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det
    return {"kernel_fixed": fixed, "l2_latency": lat, "rows": len(cal)}


#: the calibration rows of ``small_kernels.py``'s decode GEMMs in a graph (weights cycled through
#: twice L2, no flush: as inside a step) for ``efficiency.gemm_stream_clean``: Llama-3.1-8B's five
#: GEMMs at m = 1, 16 and 64. The three other models' rows and the other m are predicted.
GEMM_CLEAN_CALIBRATION = tuple(f"llama3.1-8b_{op}_m{m}_graph" for op in ("qkv", "o", "gate_up", "down", "lm_head")
                               for m in (1, 16, 64))


def fit_gemm_clean(rows: Iterable[dict], spec: GpuSpec) -> dict[str, float]:
    """Fit ``efficiency.gemm_stream_clean`` to the ``GEMM_CLEAN_CALIBRATION`` rows (each call's
    share of a graph of back-to-back GEMMs): a bounded search (to 0.001) on squared log errors."""
    cal = [r for r in rows if r["name"] in GEMM_CLEAN_CALIBRATION]
    if not cal:
        raise ValueError("the CSV has no graph GEMM calibration rows")

    def loss(eff: float) -> float:
        s = spec.model_copy(update={"efficiency": spec.efficiency.model_copy(update={"gemm_stream_clean": eff})})
        gpu = Gpu(s)
        return add_in_order(math.log(micro_gemm_s(r, gpu) / (float(r["median_us"]) * 1e-6)) ** 2 for r in cal)

    eff = round(_argmin(loss, 0.3, 1.0, 1e-3), 3)
    return {"gemm_stream_clean": eff, "loss": loss(eff), "rows": len(cal)}


def micro_gemm_s(row: dict, gpu: Gpu) -> float:
    """One call's share of a graph of back-to-back GEMMs (``small_kernels.py``'s ``sk_gemm_graph``)."""
    kernels = gemm("gemm", _int(row, "m"), _int(row, "n"), _int(row, "k"), gpu)
    return elapsed_s(simulate_gpu([(k, 0) for k in kernels], gpu, mode="graph"))
