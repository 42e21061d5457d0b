"""Published figures rdusim calibrates on or predicts, each with its source.

Owns: the numbers; nothing computes here. Source: ../shared/reference/methods.md section 1
(SnapStream, DeepSeek-R1-0528 on one SN40L-16 node, TP16).
"""

from __future__ import annotations

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
