"""Published figures rdusim calibrates on or predicts, each with its source.

Owns: the numbers and ``FIGURES`` (every figure, with its role and tolerance); nothing
computes here. Source: ../shared/reference/methods.md section 1
(SnapStream, DeepSeek-R1-0528 on one SN40L-16 node, TP16).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Normalised latency per fused kernel of one prefill MoE layer at a 128K prompt
#: (methods.md section 1 table). CALIBRATION INPUT for the five efficiency constants.
PREFILL_128K_MOE_SHARES: dict[str, float] = {
    "QKV": 0.0410,
    "MHA": 0.6940,
    "Output Proj": 0.0584,
    "Router": 0.0315,
    "MoE FFN": 0.1467,
    "SnapKV Compression": 0.0252,
    "Streaming Ring Buffer": 0.0032,
}

#: "The two SnapStream kernels add about 2-5% to total prefill time across the evaluated
#: configurations" (methods.md section 1). A PREDICTION target, never fitted.
SNAPSTREAM_PREFILL_OVERHEAD_RANGE = (0.02, 0.05)

#: Decode at a 128K prompt (methods.md section 1): maximum batch and throughput, throughput
#: scaled by 2.4 accepted tokens per step (multi-token prediction).
DECODE_128K = {
    "full": {"max_batch": 16, "tokens_per_s": 434.0},
    "snapstream": {"max_batch": 64, "tokens_per_s": 1832.0},
    "accepted_tokens_per_step": 2.4,
}

#: Llama-3.1-8B decode on 16 SN40L sockets, BF16, 8K sequence: output tokens/s per user
#: (R1 Table IV, via ../shared/reference/hardware-and-models.md A.5). An OUT-OF-SAMPLE
#: check, never fitted.
LLAMA_8B_DECODE_8K_TOKENS_PER_S_PER_USER = 1042.0


# ------------------------------------------------------------------- every figure, listed


@dataclass(frozen=True)
class Figure:
    """One published figure: a value or a (low, high) range, its source, how rdusim uses it
    (``fitted``: a calibration input; ``predicted``: never fitted; ``context``: a vendor
    figure whose configuration is not published, shown but not gated) and the tolerance the
    fidelity gate holds the model to (absolute for shares, relative otherwise)."""

    name: str
    source: str
    value: float | tuple[float, float]
    role: str
    tolerance: float
    unit: str = ""


#: methods.md section 1 and hardware-and-models.md A.5; ``rdusim fidelity`` computes each one
FIGURES: tuple[Figure, ...] = (
    *(Figure(f"prefill 128K MoE-layer share: {k}", "methods.md s1 (SnapStream)", v, "fitted", 0.02, "share")
      for k, v in PREFILL_128K_MOE_SHARES.items()),
    *(Figure(f"SnapStream prefill overhead at {n}K", "methods.md s1: 'about 2-5%'", SNAPSTREAM_PREFILL_OVERHEAD_RANGE,
             "predicted", 0.005, "fraction") for n in (32, 64, 128)),
    Figure("decode 128K full: max batch", "methods.md s1", 16, "predicted", 0.0, "sequences"),
    Figure("decode 128K SnapStream: max batch", "methods.md s1", 64, "predicted", 0.0, "sequences"),
    Figure("decode 128K full: tokens/s (batch 16)", "methods.md s1", 434.0, "fitted", 0.07, "tok/s"),
    Figure("decode 128K SnapStream: tokens/s (batch 64)", "methods.md s1", 1832.0, "fitted", 0.07, "tok/s"),
    Figure("Llama-3.1-8B decode, 16 sockets, 8K, batch 1", "R1 Table IV (hardware-and-models.md A.5)",
           LLAMA_8B_DECODE_8K_TOKENS_PER_S_PER_USER, "predicted", 0.10, "tok/s/user"),
    # Llama-3.1-70B / 405B with speculative decoding (R1 Table IV): SPECULATIVE_FIGURES in
    # rdusim.analysis.calibration.speculative
    Figure("DeepSeek-R1 on 16 SN40L, per user (model: SnapStream, 8K prompt, batch 16)", "R5 [V] (A.5): 198 tok/s/user", 198.0, "context", float("inf"),
           "tok/s/user"),
    Figure("DeepSeek-R1 high-speed configuration, per user (model: as above)", "R7 [V] (A.5): > 250 tok/s/user", (250.0, float("inf")),
           "context", float("inf"), "tok/s/user"),
    Figure("DeepSeek-R1 high-throughput, 256 users, aggregate (model: SnapStream, 8K, batch 256)", "R7 [V] (A.5): about 4,500 tok/s", 4500.0, "context",
           float("inf"), "tok/s"),
)
