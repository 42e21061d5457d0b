"""The GEMM shapes of ``sweep.py``'s ``gemm`` and ``gemm_holdout`` sections (no torch here:
``gemm_holdout.py`` reads them too, to freeze and compare the held-out rows on the CPU)."""

from __future__ import annotations

# (hidden, q_heads, kv_heads, head_dim, ffn) from each model's config.json
FAMILIES = {
    "llama3.1-8b": (4096, 32, 8, 128, 14336),
    "llama3.1-70b": (8192, 64, 8, 128, 28672),
    "qwen2.5-7b": (3584, 28, 4, 128, 18944),
    "qwen2.5-72b": (8192, 64, 8, 128, 29568),
    "mistral-nemo-12b": (5120, 32, 8, 128, 14336),
    "mixtral-8x22b": (6144, 48, 8, 128, 16384),
    "llama3.2-1b": (2048, 32, 8, 64, 8192),
    "gpt-oss-20b": (2880, 64, 8, 64, 2880),
}
MS = [1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
TPS = [1, 2, 4, 8]

#: Held out (``gemm_holdout``, set ``holdout``, run ag): families the GEMM model never saw, frozen
#: before they were measured. (hidden, q_heads, kv_heads, head_dim, ffn), each from the model's
#: Hugging Face config.json; ffn is the SwiGLU width of one of gate/up (MoE: one expert's,
#: ``moe_intermediate_size``, and the layer's FFN is experts only).
HOLDOUT_FAMILIES = {
    # meta-llama/Llama-2-7b-hf (MHA); ../shared/reference/hardware-and-models.md section C,
    # LWM-Text-Chat-1M ("LLaMA-2-7B architecture": 4096, 32/32 heads, 128, 11008)
    "llama2-7b": (4096, 32, 32, 128, 11008),
    # codellama/CodeLlama-34b-hf (GQA 8)
    "codellama-34b": (8192, 64, 8, 128, 22016),
    # Qwen/Qwen-72B (Qwen1, MHA; config intermediate_size 49152 is w1 and w2 together, 24576 each)
    "qwen-72b": (8192, 64, 64, 128, 24576),
    # meta-llama/Llama-2-70b-hf: the (n, k) of Llama-3.1-70B; only its m between the swept ones are new
    "llama2-70b": (8192, 64, 8, 128, 28672),
    # google/gemma-2-27b (q heads x head_dim 4096 != hidden 4608)
    "gemma2-27b": (4608, 32, 16, 128, 36864),
    # Qwen/Qwen3-32B (q heads x head_dim 8192 != hidden 5120)
    "qwen3-32b": (5120, 64, 8, 128, 25600),
    # mistralai/Mistral-Large-Instruct-2407
    "mistral-large-2": (12288, 96, 8, 128, 28672),
    # microsoft/Phi-3-medium-4k-instruct (10 KV heads: TP 1 and 2 only, HOLDOUT_TPS)
    "phi3-medium": (5120, 40, 10, 128, 17920),
    # Qwen/Qwen3-30B-A3B: 128 experts of 768, top 8
    "qwen3-30b-a3b": (2048, 32, 4, 128, 768),
    # Qwen/Qwen3-235B-A22B: 128 experts of 1536, top 8
    "qwen3-235b-a22b": (4096, 64, 4, 128, 1536),
}
HOLDOUT_MOE = {"qwen3-30b-a3b", "qwen3-235b-a22b"}
HOLDOUT_TPS = {"phi3-medium": [1, 2]}
#: m of the issue's named families (1 and 8192 as swept, the rest between the swept m)
HOLDOUT_MS = [1, 2, 8, 24, 48, 96, 192, 384, 768, 1536, 3072, 6144, 8192]
#: m of the others (fewer, to keep the section near 900 shapes)
HOLDOUT_MS_THIN = [1, 24, 192, 1536, 6144]
HOLDOUT_FULL = ("llama2-7b", "codellama-34b", "qwen-72b")
#: (m, n, k) of the held-out plan that other committed runs measured already (P10's measure.py,
#: h100-20261123*.csv: m = 8; small_kernels.py, runs l and m: the decode GEMMs of m = 1-64); the
#: held-out rows leave them out (tests/gpu/test_gemm_holdout.py checks every committed CSV)
MEASURED_ELSEWHERE = {
    (1, 3072, 8192),
    (2, 3072, 8192),
    (8, 3072, 8192),
    (2, 4096, 4096),
    (8, 4096, 4096),
    (2, 6144, 4096),
    (8, 6144, 4096),
}


def family_gemms(name: str, tp: int) -> list[tuple[str, int, int]]:
    """(op, n, k) of one layer's GEMMs on one GPU of a TP group."""
    if name == "deepseek-v3":  # MLA: heads split by TP; experts whole (expert parallel)
        return [
            ("q_a", 1536, 7168),
            ("q_b", 128 * 192 // tp, 1536),
            ("kv_a", 576, 7168),
            ("kv_b", 128 * 256 // tp, 512),
            ("o", 7168, 128 * 128 // tp),
            ("expert_gate_up", 4096, 7168),
            ("expert_down", 7168, 2048),
        ]
    h, hq, hkv, hd, ffn = FAMILIES[name] if name in FAMILIES else HOLDOUT_FAMILIES[name]
    kv = max(1, hkv // tp)
    attn = [("qkv", (hq // tp + 2 * kv) * hd, h), ("o", h, hq // tp * hd)]
    if name in HOLDOUT_MOE:  # experts whole (expert parallel), as DeepSeek-V3's
        return attn + [("expert_gate_up", 2 * ffn, h), ("expert_down", h, ffn)]
    return attn + [("gate_up", 2 * ffn // tp, h), ("down", h, ffn // tp)]


def gemm_plan() -> list[tuple[str, int, str, int, int, list[int]]]:
    """(family, tp, op, n, k, m values) of the ``gemm`` section, in its order."""
    return [
        (fam, tp, op, n, k, MS)
        for fam in [*FAMILIES, "deepseek-v3"]
        for tp in TPS
        for op, n, k in family_gemms(fam, tp)
    ]


def holdout_plan() -> list[tuple[str, int, str, int, int, list[int]]]:
    """(family, tp, op, n, k, m values) of the ``gemm_holdout`` section, in its order."""
    return [
        (fam, tp, op, n, k, HOLDOUT_MS if fam in HOLDOUT_FULL else HOLDOUT_MS_THIN)
        for fam in HOLDOUT_FAMILIES
        for tp in HOLDOUT_TPS.get(fam, TPS)
        for op, n, k in family_gemms(fam, tp)
    ]


def plan_shapes(
    plan: list, seen: set[tuple[int, int, int]] | None = None
) -> list[tuple[str, int, str, int, int, int]]:
    """(family, tp, op, n, k, m) of a plan, each (m, n, k) once (the first family's), none of ``seen``."""
    seen = set() if seen is None else set(seen)
    out = []
    for fam, tp, op, n, k, ms in plan:
        for m in ms:
            if (m, n, k) not in seen:
                seen.add((m, n, k))
                out.append((fam, tp, op, n, k, m))
    return out


def holdout_shapes() -> list[tuple[str, int, str, int, int, int]]:
    """The held-out rows: none repeats a shape the ``gemm`` section or another run measured."""
    swept = {(m, n, k) for _, _, _, n, k, m in plan_shapes(gemm_plan())}
    return plan_shapes(holdout_plan(), swept | MEASURED_ELSEWHERE)


#: the shapes run aj profiled with Nsight Compute (gemm_holdout_ncu.py), in its order (m, n, k):
#: the m = 192-448 neighbourhood of the held-out misses (docs/gpu.md, "Why the m = 192-384 rows miss")
NCU_SHAPES = [
    (64, 35840, 5120),
    (192, 35840, 5120),
    (448, 35840, 5120),
    (192, 17920, 5120),
    (192, 4096, 11008),
    (384, 4096, 11008),
    (256, 4096, 11008),
    (384, 28672, 4096),
    (256, 28672, 4096),
]
