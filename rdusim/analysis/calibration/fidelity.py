"""Every published figure against the model: value, error, fitted or predicted, leave-one-out.

Owns: ``fidelity``, ``within_tolerance``. Imports: published, calibrate, result, sweep, mapping.

Each figure of ``published.FIGURES`` is computed with the constants on disk. The two decode
throughputs are fitted together with one constant (the software call cost); a decode step
is exactly affine in that constant (every call pays it once, calls do not overlap), so the
leave-one-out error (fit the constant on one point alone, predict the other) is closed form
from two simulations per point. The prefill shares' leave-one-out needs seven refits of five
parameters (minutes): not computed here (``rdusim calibrate --phase prefill`` reproduces it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from rdusim.analysis.calibration.fit import layer_shares, snapstream_overhead
from rdusim.analysis.calibration.published import DECODE_128K, FIGURES, Figure
from rdusim.analysis.metrics import step_figures
from rdusim.analysis.result import simulate
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.capacity import max_batch
from rdusim.mapping.plan import Plan
from rdusim.model.speculative import accepted_tokens_per_step

PREFILL = Path("mappings/deepseek-r1/prefill-snapstream.yaml")
DECODE = {"full": Path("mappings/deepseek-r1/decode.yaml"), "snapstream": Path("mappings/deepseek-r1/decode-snapstream.yaml")}
LLAMA = Path("mappings/llama-3.1-8b/decode.yaml")
LLAMA_HW = Path("hw_configs/sn40l-16.yaml")


def fidelity(root: Path, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """One row per figure: published, model, error, role, tolerance, within, leave-one-out
    (``progress(done, total)`` after each of its stages of simulations)."""
    values: dict[str, float] = {}
    loo: dict[str, float] = {}
    stages = iter(range(1, 7))

    def advance() -> None:
        if progress is not None:
            progress(next(stages), 6)

    prefill = load_mapping(root / PREFILL)
    efficiency = prefill.system.socket.spec.efficiency.model_dump()
    shares = layer_shares(prefill, efficiency)
    for kernel, share in shares.items():
        values[f"prefill 128K MoE-layer share: {kernel}"] = share
    for n in (32, 64, 128):
        values[f"SnapStream prefill overhead at {n}K"] = snapstream_overhead(prefill, n * 1024, efficiency)
    advance()
    decode = {p: load_mapping(root / path) for p, path in DECODE.items()}
    lines = {p: _step_line(m) for p, m in decode.items()}
    advance()
    for policy, label in (("full", "full"), ("snapstream", "SnapStream")):
        batch = DECODE_128K[policy]["max_batch"]
        values[f"decode 128K {label}: max batch"] = max_batch(root / DECODE[policy])[0]
        step0, calls, c = lines[policy]
        values[f"decode 128K {label}: tokens/s (batch {batch})"] = _tokens_per_s(decode[policy], step0 + calls * c, batch)
    loo |= _leave_one_out(decode, lines)
    advance()
    llama = simulate(root / LLAMA, hw=root / LLAMA_HW, overrides=["defaults.tp=16"], batch=1, record_events=False)
    values["Llama-3.1-8B decode, 16 sockets, 8K, batch 1"] = _tokens_per_s(llama.plan, llama.total_s, 1)
    advance()
    # vendor DeepSeek figures, configuration unpublished: the shipped mappings at the closest
    # stated points (per user at the smallest batch, 8K prompt; aggregate at 256 users)
    small = simulate(root / DECODE["snapstream"], seq_len=8192, batch=16, record_events=False)
    per_user = _tokens_per_s(small.plan, small.total_s, 1)  # one sequence's tokens per second
    advance()
    values["DeepSeek-R1 on 16 SN40L, per user (model: SnapStream, 8K prompt, batch 16)"] = per_user
    values["DeepSeek-R1 high-speed configuration, per user (model: as above)"] = per_user
    wide = simulate(root / DECODE["snapstream"], seq_len=8192, batch=256, record_events=False)
    values["DeepSeek-R1 high-throughput, 256 users, aggregate (model: SnapStream, 8K, batch 256)"] = \
        _tokens_per_s(wide.plan, wide.total_s, 256)
    advance()
    # figures no shipped model expresses (a draft model's speculative decoding) carry no value
    return pd.DataFrame([_row(f, values.get(f.name, math.nan), loo.get(f.name)) for f in FIGURES])


def _step_line(loaded: LoadedMapping) -> tuple[float, int, float]:
    """(step at zero software call cost, software calls per step, the cost on disk)."""
    socket = loaded.system.socket.spec.kernel_launch
    zero = dataclasses.replace(loaded, system=loaded.system.with_software_launch(0.0))
    result = simulate(zero, record_events=False, check_capacity=False)
    calls = int(sum(k.orchestration == "software" for ks in result.plan.kernels.values() for k in ks
                    for _ in range(result.plan.layer_counts[ks[0].layer_type])))
    return result.total_s, calls, socket.software_s


def _tokens_per_s(mapping: LoadedMapping | Plan, step_s: float, batch: int) -> float:
    """Decode throughput of a step, by the one definition (``rdusim.analysis.metrics``)."""
    spec = mapping.spec if isinstance(mapping, LoadedMapping) else mapping.mapping
    return step_figures("decode", step_s, batch=batch, seq_len=spec.workload.seq_len,
                        accepted=accepted_tokens_per_step(spec))["tokens_per_s"]


def _leave_one_out(decode: dict[str, LoadedMapping], lines: dict[str, tuple[float, int, float]]) -> dict[str, float]:
    """Fit the call cost on one 128K point alone (exactly), predict the other: its error."""
    names = {"full": "decode 128K full: tokens/s (batch 16)", "snapstream": "decode 128K SnapStream: tokens/s (batch 64)"}
    accepted = DECODE_128K["accepted_tokens_per_step"]
    out = {}
    for held, other in (("full", "snapstream"), ("snapstream", "full")):
        published = DECODE_128K[other]
        step0, calls, _ = lines[other]
        cost = (published["max_batch"] * accepted / published["tokens_per_s"] - step0) / calls  # step at the target
        step0, calls, _ = lines[held]
        batch = DECODE_128K[held]["max_batch"]
        out[names[held]] = _tokens_per_s(decode[held], step0 + calls * cost, batch) / DECODE_128K[held]["tokens_per_s"] - 1
    return out


def _row(figure: Figure, model: float, loo: float | None) -> dict:
    low, high = figure.value if isinstance(figure.value, tuple) else (figure.value, figure.value)
    if math.isnan(model):
        error = math.nan
    elif figure.unit in ("share", "fraction"):  # absolute error, percentage points
        error = 0.0 if low <= model <= high else (model - high if model > high else model - low)
    else:                                     # relative error to the nearest edge
        error = 0.0 if low <= model <= high else (model / high - 1 if model > high else model / low - 1)
    return {"figure": figure.name, "source": figure.source, "unit": figure.unit, "published": _fmt(figure.value, figure.unit in ("share", "fraction")), "model": model,
            "error": error, "role": figure.role, "tolerance": figure.tolerance,
            "within": abs(error) <= figure.tolerance, "leave_one_out": loo if loo is not None else math.nan}


def _fmt(value: float | tuple[float, float], percent: bool) -> str:
    def one(x: float) -> str:
        return f"{x * 100:g}%" if percent else f"{x:g}"
    if isinstance(value, tuple):
        return f"{one(value[0])}-{one(value[1])}" if math.isfinite(value[1]) else f">= {one(value[0])}"
    return one(value)


def within_tolerance(frame: pd.DataFrame) -> pd.DataFrame:
    """The gated figures (fitted and predicted) that leave their tolerance."""
    gated = frame[frame["role"] != "context"]
    return gated[~gated["within"]]
