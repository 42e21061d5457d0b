"""Every published figure against the model: value, error, fitted or predicted, leave-one-out.

Owns: ``fidelity``, ``within_tolerance``, ``known_misses`` and ``GROUPS`` (the functions that
compute the figures, one per source or deployment). Imports: published, calibrate, result,
sweep, mapping.

Each figure of ``published.FIGURES`` is computed with the constants on disk, by one of
``GROUPS``; a number is compared with its value or range, a trend (``rises`` / ``falls``)
by the sign of every step between the model's points. The two decode
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
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rdusim.analysis.calibration.fit import layer_shares, snapstream_overhead
from rdusim.analysis.calibration.published import (
    DECODE_128K,
    DEEPSEEK_R1_HIGH_THROUGHPUT_USERS,
    FIGURES,
    Figure,
)
from rdusim.analysis.calibration.speculative import speculative_figures
from rdusim.analysis.metrics import step_figures
from rdusim.analysis.result import SimulationResult, simulate
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.capacity import max_batch
from rdusim.mapping.plan import Plan
from rdusim.model.speculative import accepted_tokens_per_step

PREFILL = Path("mappings/deepseek-r1/prefill-snapstream.yaml")
DECODE = {"full": Path("mappings/deepseek-r1/decode.yaml"), "snapstream": Path("mappings/deepseek-r1/decode-snapstream.yaml")}
LLAMA = Path("mappings/llama-3.1-8b/decode.yaml")
LLAMA_HW = Path("hw_configs/sn40l-16.yaml")
#: the production DeepSeek-R1 mappings (docs/calibration.md, "Production configurations")
PRODUCTION = {"speed": Path("mappings/deepseek-r1/decode-high-speed.yaml"),
              "throughput": Path("mappings/deepseek-r1/decode-high-throughput.yaml")}
#: R3's kernel looping, on every SN40L configuration rdusim ships at batch 1 (mapping, node,
#: overrides): Llama-3.1-8B and 70B on 8 and 16 sockets (BF16, 8K, hardware orchestration, one
#: fused call per layer, R1 section VI-B), DeepSeek-R1's high-speed mapping on 16
LOOPING: dict[str, tuple[Path, Path | None, tuple[str, ...]]] = {
    "Llama-3.1-8B, 8 sockets": (LLAMA, Path("hw_configs/sn40l-8.yaml"), ("defaults.tp=8",)),
    "Llama-3.1-8B, 16 sockets": (LLAMA, LLAMA_HW, ("defaults.tp=16",)),
    "Llama-3.1-70B, 8 sockets": (Path("mappings/llama-3.1-70b/decode-tp16.yaml"), Path("hw_configs/sn40l-8.yaml"),
                                 ("defaults.tp=8",)),
    "Llama-3.1-70B, 16 sockets": (Path("mappings/llama-3.1-70b/decode-tp16.yaml"), None, ()),
    "DeepSeek-R1 high-speed, 16 sockets": (PRODUCTION["speed"], None, ()),
}


@dataclass(frozen=True)
class Modelled:
    """What the model gives for one figure: a number, or a trend's labelled points in the
    order the figure names; ``detail`` says what was simulated (shown in the output)."""

    value: float = math.nan
    points: tuple[tuple[str, float], ...] = ()
    detail: str = ""
    leave_one_out: float = math.nan   # a fitted figure: its error when fitted without it


#: a group of figures computed together: the repository root -> {figure name: model value}
Group = Callable[[Path], dict[str, "float | Modelled"]]


def fidelity(root: Path, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """One row per figure: published, model, error, role, tolerance, within, leave-one-out, reason
    (``progress(done, total)`` after each group of simulations)."""
    values: dict[str, float | Modelled] = {}
    for done, group in enumerate(GROUPS, start=1):
        values |= group(root)
        if progress is not None:
            progress(done, len(GROUPS))
    unknown = set(values) - {f.name for f in FIGURES}
    if unknown:  # a group computing a figure the table does not list is a bug, not a row
        raise KeyError(f"fidelity groups compute figures FIGURES does not list: {sorted(unknown)}")
    return pd.DataFrame([_row(f, values.get(f.name, Modelled())) for f in FIGURES])


def _research_prefill(root: Path) -> dict[str, float | Modelled]:
    """The SnapStream paper's prefill figures (methods.md section 1): shares (fitted), overheads."""
    values: dict[str, float | Modelled] = {}
    prefill = load_mapping(root / PREFILL)
    efficiency = prefill.system.socket.spec.efficiency.model_dump()
    for kernel, share in layer_shares(prefill, efficiency).items():
        values[f"prefill 128K MoE-layer share: {kernel}"] = share
    for n in (32, 64, 128):
        values[f"SnapStream prefill overhead at {n}K"] = snapstream_overhead(prefill, n * 1024, efficiency)
    return values


def _research_decode(root: Path) -> dict[str, float | Modelled]:
    """The SnapStream paper's 128K decode figures: maximum batches and the fitted pair, with
    its leave-one-out errors."""
    values: dict[str, float | Modelled] = {}
    decode = {p: load_mapping(root / path) for p, path in DECODE.items()}
    lines = {p: _step_line(m) for p, m in decode.items()}
    loo = _leave_one_out(decode, lines)
    for policy, label in (("full", "full"), ("snapstream", "SnapStream")):
        batch = DECODE_128K[policy]["max_batch"]
        values[f"decode 128K {label}: max batch"] = max_batch(root / DECODE[policy])[0]
        step0, calls, c = lines[policy]
        name = f"decode 128K {label}: tokens/s (batch {batch})"
        values[name] = Modelled(_tokens_per_s(decode[policy], step0 + calls * c, batch), leave_one_out=loo[name])
    return values


def _llama(root: Path) -> dict[str, float | Modelled]:
    """R1 Table IV's Llama-3.1 rows (8B: the shipped decode mapping at TP16, batch 1)."""
    llama = simulate(root / LLAMA, hw=root / LLAMA_HW, overrides=["defaults.tp=16"], batch=1, record_events=False)
    return {"Llama-3.1-8B decode, 16 sockets, 8K, batch 1": Modelled(
        _tokens_per_s(llama.plan, llama.total_s, 1), detail="mappings/llama-3.1-8b/decode.yaml, TP16, batch 1")}


def _deepseek_production(root: Path) -> dict[str, float | Modelled]:
    """R5/R7's vendor DeepSeek-R1 figures against the production mappings (docs/calibration.md,
    "Production configurations"): per user from the high-speed one, the aggregate from the
    high-throughput one."""
    speed = simulate(root / PRODUCTION["speed"], record_events=False)
    per_user = Modelled(_tokens_per_s(speed.plan, speed.total_s, 1),  # one sequence's tokens per second
                        detail=f"{PRODUCTION['speed'].name}: {_step_detail(speed)}")
    wide = simulate(root / PRODUCTION["throughput"], record_events=False)
    return {
        "DeepSeek-R1 on 16 SN40L, per user": per_user,
        "DeepSeek-R1 high-speed configuration, per user": per_user,
        f"DeepSeek-R1 high-throughput, {DEEPSEEK_R1_HIGH_THROUGHPUT_USERS} users, aggregate": Modelled(
            _tokens_per_s(wide.plan, wide.total_s, wide.plan.batch),
            detail=f"{PRODUCTION['throughput'].name}: {_step_detail(wide)}"),
    }


def _step_detail(result: SimulationResult) -> str:
    roofline = result.kernels["roofline_s"].sum() / result.total_s
    return (f"batch {result.plan.batch}, {result.plan.seq_len // 1024}K; step {result.total_s * 1e3:.3g} ms, "
            f"{roofline:.0%} of its roofline")


def _kernel_looping(root: Path) -> dict[str, float | Modelled]:
    """R3's kernel-looping figures: every configuration with and without looping, batch 1."""
    steps: dict[str, tuple[float, float, float]] = {}   # label -> (plain step, looped step, looped roofline share)
    for label, (path, hw, overrides) in LOOPING.items():
        plain, looped = (simulate(root / path, hw=None if hw is None else root / hw, batch=1, record_events=False,
                                  overrides=[*overrides, f"defaults.kernel_looping={flag}"])
                         for flag in ("false", "true"))
        steps[label] = (plain.total_s, looped.total_s, looped.kernels["roofline_s"].sum() / looped.total_s)
    speedups = {label: plain / looped for label, (plain, looped, _) in steps.items()}
    best = max(speedups, key=speedups.__getitem__)
    values: dict[str, float | Modelled] = {
        "R3: kernel looping decode speedup, largest over the configurations": Modelled(
            speedups[best], detail=f"{best}; all: " + ", ".join(f"{k} {v:.2f}x" for k, v in speedups.items()))}
    for sockets in (8, 16):
        shares = {k: share for k, (_, _, share) in steps.items() if k.endswith(f"{sockets} sockets")}
        top = max(shares, key=shares.__getitem__)
        values[f"R3: kernel-looped decode, share of the HBM roofline, {sockets} sockets (best model)"] = Modelled(
            shares[top], detail=f"{top}; all: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))
    small = ("Llama-3.1-8B, 8 sockets", "Llama-3.1-8B, 16 sockets")
    values["R3: kernel looping's speedup grows from 8 to 16 sockets (Llama-3.1-8B, batch 1)"] = Modelled(
        points=tuple((label.split(", ")[1], speedups[label]) for label in small))
    values["R3: kernel-looped decode speeds up from 8 to 16 sockets (Llama-3.1-8B, batch 1)"] = Modelled(
        points=tuple((label.split(", ")[1], 1.0 / steps[label][1]) for label in small))
    return values


#: every group of figures, in the order of ``FIGURES`` (a figure no group computes has no
#: value: only a known miss may be left so)
GROUPS: tuple[Group, ...] = (_research_prefill, _research_decode, _llama, _kernel_looping, _deepseek_production,
                             speculative_figures)


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


def _row(figure: Figure, modelled: float | Modelled) -> dict:
    if not isinstance(modelled, Modelled):
        modelled = Modelled(modelled)
    model, detail = modelled.value, modelled.detail
    if figure.is_trend:
        error = math.nan
        values = [v for _, v in modelled.points]
        steps = [b - a for a, b in zip(values, values[1:], strict=False)]
        within = bool(steps) and all(d > 0 if figure.value == "rises" else d < 0 for d in steps)
        order = " < " if figure.value == "rises" else " > "
        detail = order.join(f"{label} {v:.3g}" for label, v in modelled.points) + (f" ({detail})" if detail else "")
    else:
        low, high = figure.value if isinstance(figure.value, tuple) else (figure.value, figure.value)
        if math.isnan(model):
            error = math.nan
        elif figure.unit in ("share", "fraction"):  # absolute error, percentage points
            error = 0.0 if low <= model <= high else (model - high if model > high else model - low)
        else:                                     # relative error to the nearest edge
            error = 0.0 if low <= model <= high else (model / high - 1 if model > high else model / low - 1)
        within = not math.isnan(error) and abs(error) <= figure.tolerance
    return {"figure": figure.name, "source": figure.source, "unit": figure.unit,
            "published": figure.value if figure.is_trend else _fmt(figure.value, figure.unit in ("share", "fraction")),
            "model": model, "error": error, "role": figure.role, "tolerance": figure.tolerance,
            "within": within, "leave_one_out": modelled.leave_one_out,
            "detail": detail, "reason": figure.reason}


def _fmt(value: float | tuple[float, float], percent: bool) -> str:
    def one(x: float) -> str:
        return f"{x * 100:g}%" if percent else f"{x:g}"
    if isinstance(value, tuple):
        return f"{one(value[0])}-{one(value[1])}" if math.isfinite(value[1]) else f">= {one(value[0])}"
    return one(value)


def within_tolerance(frame: pd.DataFrame) -> pd.DataFrame:
    """The gated figures (fitted and predicted) that leave their tolerance (or, for a trend,
    whose points do not move the published way)."""
    gated = frame[frame["role"] != "known miss"]
    return gated[~gated["within"]]


def known_misses(frame: pd.DataFrame) -> pd.DataFrame:
    """The figures no documented mechanism reaches, each with its reason (docs/calibration.md)."""
    return frame[frame["role"] == "known miss"]
