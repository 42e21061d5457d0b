"""The figures of one simulated step: time to first token, time per output token, throughput.

Owns: ``step_figures``, ``STEP_FIGURES``. Imports: nothing. The one definition that the
sweep, the explorer (estimator and simulator), calibration and the reports use.

- **prefill**: a step is one forward pass over the batch's prompts. ``ttft_s`` (time to
  first token) is the step; ``tokens_per_s`` counts prompt tokens processed,
  ``batch x seq_len / step``; ``tpot_s`` is not defined (NaN).
- **decode**: a step generates ``accepted`` tokens per sequence (multi-token prediction:
  the published throughput counts 2.4 accepted tokens per forward pass, methods.md
  section 1). ``tpot_s = step / accepted``; ``tokens_per_s = batch x accepted / step``;
  ``ttft_s`` is not defined (NaN).
- ``latency_s`` is the phase's user-facing latency: TTFT at prefill, TPOT at decode (what
  the explorer's ``latency`` objective minimises).
"""

from __future__ import annotations

NAN = float("nan")

#: the keys ``step_figures`` returns, in table order
STEP_FIGURES = ("step_s", "ttft_s", "tpot_s", "latency_s", "tokens_per_s")


def step_figures(phase: str, step_s: float, *, batch: int, seq_len: int, accepted: float) -> dict[str, float]:
    """The figures of a step of ``step_s`` seconds (see the module docstring)."""
    if phase == "prefill":
        return {"step_s": step_s, "ttft_s": step_s, "tpot_s": NAN, "latency_s": step_s,
                "tokens_per_s": batch * seq_len / step_s}
    tpot = step_s / accepted
    return {"step_s": step_s, "ttft_s": NAN, "tpot_s": tpot, "latency_s": tpot,
            "tokens_per_s": batch * accepted / step_s}
