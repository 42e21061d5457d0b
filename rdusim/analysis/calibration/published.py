"""Published figures rdusim calibrates on or predicts, each with its source.

Owns: the numbers and ``FIGURES`` (every figure, with its role and tolerance); nothing
computes here. Sources: ../shared/reference/methods.md section 1 (SnapStream,
DeepSeek-R1-0528 on one SN40L-16 node, TP16) and ../shared/reference/hardware-and-models.md
A.5 / A.6 (R1, R3, R4, R5, R7).
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


#: Llama-3.1-70B / 405B decode on 16 SN40L sockets, BF16, 8K sequence, with speculative
#: decoding: output tokens/s per user (R1 Table IV [P], via hardware-and-models.md A.5).
LLAMA_70B_DECODE_8K_TOKENS_PER_S_PER_USER = 457.0
LLAMA_405B_DECODE_8K_TOKENS_PER_S_PER_USER = 129.0

#: DeepSeek-R1 671B on one SambaRack (16 SN40L): "198 tok/s/user" "at the time of writing"
#: (R5 [V], DAC 2025 talk abstract, via hardware-and-models.md A.5).
DEEPSEEK_R1_TOKENS_PER_S_PER_USER = 198.0
#: DeepSeek (R1/V3 family) on a SambaRack: "> 250 tok/s/user" in the high-speed configuration,
#: "about 4,500 tok/s" aggregate with 256 concurrent users in the high-throughput one
#: (R7 [V], SambaNova blog, Artificial Analysis benchmark; hardware-and-models.md A.5).
DEEPSEEK_R1_HIGH_SPEED_TOKENS_PER_S_PER_USER = 250.0
DEEPSEEK_R1_HIGH_THROUGHPUT_USERS = 256
DEEPSEEK_R1_HIGH_THROUGHPUT_TOKENS_PER_S = 4500.0

#: Kernel looping on SN40L (R3, Koeplinger et al., arXiv 2410.23668, abstract; A.5): "speeds up
#: the decode phase of a wide array of powerful open-source models by up to 2.2x", and "enables
#: SN40L to achieve over 90% of peak performance on 8 and 16 sockets" (decode is bound by HBM
#: bandwidth: peak = the HBM roofline). Both PREDICTED, never fitted.
KERNEL_LOOPING_MAX_SPEEDUP = 2.2
KERNEL_LOOPING_ROOFLINE_SHARE = 0.90

#: the tolerances of the gate (docs/calibration.md, "Every figure at once"): a figure from a
#: paper, whose conditions are stated, within 10%; a vendor figure with loose conditions
#: (a blog or talk abstract: prompt length, batch or date not stated), within 20%
PAPER_TOLERANCE = 0.10
VENDOR_TOLERANCE = 0.20


# ------------------------------------------------------------------- every figure, listed

#: how ``rdusim fidelity`` uses a figure: ``fitted`` (a calibration input), ``predicted``
#: (never fitted; gated with its tolerance), ``known miss`` (predicted, but no documented
#: mechanism reaches it: shown with its ``reason``, explained in docs/calibration.md, and
#: listed by name in tests/test_fidelity.py, so that neither a new miss nor a fixed one
#: passes unnoticed)
ROLES = ("fitted", "predicted", "known miss")
#: a ``trend`` figure's published value: the direction the model's points must take in order
TRENDS = ("rises", "falls")


@dataclass(frozen=True)
class Figure:
    """One published figure: a value, a (low, high) range or a trend (``"rises"`` / ``"falls"``:
    the model's points, in the order computed, must move that way), its source, its role
    (``ROLES``), the tolerance the fidelity gate holds the model to (absolute for shares and
    fractions, relative otherwise; a trend has none: its sign and order are checked) and,
    for a known miss, the reason no documented mechanism reaches it."""

    name: str
    source: str
    value: float | tuple[float, float] | str
    role: str
    tolerance: float
    unit: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"figure {self.name!r}: role {self.role!r} is not one of {ROLES}")
        if (self.role == "known miss") != bool(self.reason.strip()):
            raise ValueError(f"figure {self.name!r}: a known miss, and only a known miss, states its reason")
        if isinstance(self.value, str) and self.value not in TRENDS:
            raise ValueError(f"figure {self.name!r}: a trend {self.value!r} is not one of {TRENDS}")

    @property
    def is_trend(self) -> bool:
        return isinstance(self.value, str)


_LOOPING_SPEEDUP = ("the model's largest looping speedup comes from removing each layer's launch and node barrier "
                    "(1 us + one 2 us P2P step, A.7 [A]) and overlapping the next layer's weight loads with this "
                    "layer's compute; 2.2x would need a per-layer boundary costing about as much as the layer itself, "
                    "which no source gives for hardware-orchestrated calls (docs/calibration.md)")
_BATCH_ONE = ("the high-speed mapping's batch-1 step runs at about 75% of its HBM roofline, as R5 ('over 75% of "
              "peak') and R3 ('over 90%') report for SN40L decode; the vendor figure needs a step about 1.6x (R7) to 2x "
              "(R5) longer, and no documented mechanism costs that at batch 1 (collective latency, launches, routing, "
              "DDR streaming and absorbed attention are each audited in docs/calibration.md, 'Production "
              "configurations')")
_R5_DATED = (" R5's figure is dated 'at the time of writing' (DAC 2025), before R7's '> 250 ... as we had highlighted "
             "earlier this year' on the same rack: one configuration cannot meet both.")
#: the acceptance rate the SD mappings cite, and what it gives at R4's k = 9 (docs/speculative.md)
_RATE = ("the cited acceptance rate (0.777: a Llama-3.2-1B draft of a Llama-3.1-8B target, greedy; no published "
         "rate for this pair) gives 4.12 tokens per step at k=9 and at most 4.48 for any k")
_R4_RATE = (f"{_RATE}; the figure needs about 6 (a near 0.9), and R4's summaries do not state the rate behind it "
            "(docs/speculative.md, sensitivity table)")

#: Speculative decoding (P11): R1 Table IV's 70B/405B rows, predicted by the SD production
#: mappings, and R4's speedups and trends (reader summaries [S], A.5/A.6), predicted by the same
#: mappings at R4's points; a speedup is SD tokens/s/user over the same mapping at k = 0 (plain
#: decoding). Computed by ``rdusim.analysis.calibration.speculative``.
SPECULATIVE_FIGURES: tuple[Figure, ...] = (
    Figure("Llama-3.1-70B decode, 16 sockets, 8K, speculative decoding", "R1 Table IV (A.5)",
           LLAMA_70B_DECODE_8K_TOKENS_PER_S_PER_USER, "predicted", PAPER_TOLERANCE, "tok/s/user"),
    Figure("Llama-3.1-405B decode, 16 sockets, 8K, speculative decoding", "R1 Table IV (A.5)",
           LLAMA_405B_DECODE_8K_TOKENS_PER_S_PER_USER, "known miss", PAPER_TOLERANCE, "tok/s/user",
           "810 GB of BF16 weights over the node's 25.6 TB/s take 31.6 ms per target pass at HBM peak, so 129 "
           f"tok/s/user needs >= 4.08 tokens per pass even at 100% of peak with a free draft; {_RATE}, which "
           "leaves no room for the 3B draft's steps or the achieved bandwidth"),
    Figure("SD speedup, 405B + 3B draft, k=9, BS 1, 4K", "R4 Fig. 14/Table 4 [S] (A.5): up to 6.1x", 6.1,
           "known miss", PAPER_TOLERANCE, "x", _R4_RATE),
    Figure("SD speedup, 70B + 1B draft, k=9, BS 1, 4K", "R4 Table 4 [S] (A.6)", 4.7, "known miss",
           PAPER_TOLERANCE, "x", _R4_RATE),
    Figure("SD speedup vs target/draft size ratio (k=9, BS 1, 4K)", "R4 Table 4 [S] (A.6)", "rises", "predicted",
           float("inf"), "x"),
    Figure("SD speedup vs k (70B + 1B, BS 1, 4K)", "R4 Table 4 [S] (A.6)", "rises", "predicted", float("inf"), "x"),
    Figure("SD speedup vs batch (70B + 1B, k=9, 4K)", "R4 Table 4 [S] (A.6)", "falls", "predicted", float("inf"), "x"),
    Figure("SD speedup vs sequence length 4K -> 32K (70B + 1B, k=9, BS 1)", "R4 Table 4 [S] (A.6)", "falls",
           "predicted", float("inf"), "x"),
)

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
           LLAMA_8B_DECODE_8K_TOKENS_PER_S_PER_USER, "predicted", PAPER_TOLERANCE, "tok/s/user"),
    Figure("R3: kernel looping decode speedup, largest over the configurations", "R3 abstract (A.5): 'up to 2.2x'",
           KERNEL_LOOPING_MAX_SPEEDUP, "known miss", PAPER_TOLERANCE, "x", _LOOPING_SPEEDUP),
    Figure("R3: kernel-looped decode, share of the HBM roofline, 8 sockets (best model)",
           "R3 abstract (A.5): 'over 90% of peak'", (KERNEL_LOOPING_ROOFLINE_SHARE, 1.0), "predicted", PAPER_TOLERANCE,
           "of roofline"),
    Figure("R3: kernel-looped decode, share of the HBM roofline, 16 sockets (best model)",
           "R3 abstract (A.5): 'over 90% of peak'", (KERNEL_LOOPING_ROOFLINE_SHARE, 1.0), "predicted", PAPER_TOLERANCE,
           "of roofline"),
    Figure("R3: kernel looping's speedup grows from 8 to 16 sockets (Llama-3.1-8B, batch 1)",
           "R3 abstract (A.5): looping 'allows scaling of decode performance over multiple sockets'", "rises",
           "predicted", 0.0, "x"),
    Figure("R3: kernel-looped decode speeds up from 8 to 16 sockets (Llama-3.1-8B, batch 1)",
           "R3 abstract (A.5): 'speedups of up to 2.5x' from more sockets", "rises", "predicted", 0.0, "tok/s/user"),
    Figure("DeepSeek-R1 on 16 SN40L, per user", "R5 [V] (A.5): 198 tok/s/user", DEEPSEEK_R1_TOKENS_PER_S_PER_USER,
           "known miss", VENDOR_TOLERANCE, "tok/s/user", _BATCH_ONE + _R5_DATED),
    # "exceeding 250": a benchmark's result quoted as a round floor, read as 250 (an open range
    # would pass any fast model); docs/calibration.md
    Figure("DeepSeek-R1 high-speed configuration, per user", "R7 [V] (A.5): > 250 tok/s/user",
           DEEPSEEK_R1_HIGH_SPEED_TOKENS_PER_S_PER_USER, "known miss", VENDOR_TOLERANCE, "tok/s/user", _BATCH_ONE),
    Figure(f"DeepSeek-R1 high-throughput, {DEEPSEEK_R1_HIGH_THROUGHPUT_USERS} users, aggregate",
           "R7 [V] (A.5): about 4,500 tok/s", DEEPSEEK_R1_HIGH_THROUGHPUT_TOKENS_PER_S, "predicted", VENDOR_TOLERANCE,
           "tok/s"),
    *SPECULATIVE_FIGURES,
)
