"""Configured for speed or for throughput: tokens/s per user against aggregate tokens/s.

Owns: ``Configuration``, ``CONFIGURATIONS``, ``MTP_K1``, ``speed_throughput``, ``published_points``. Imports: sweep,
calibration.published, pandas.

Each configuration is a decode mapping swept over batch sizes at its own prompt length
(``rdusim.analysis.sweep``): a row's aggregate is ``tokens_per_s`` (batch x accepted tokens
per step / step time), its per-user speed the aggregate over the batch. Points that do not
fit HBM are dropped. The published figures are placed by what they state: an aggregate with
its number of users is a point; a per-user figure without a batch is a per-user value only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rdusim.analysis.calibration.published import (
    DEEPSEEK_R1_HIGH_SPEED_TOKENS_PER_S_PER_USER,
    DEEPSEEK_R1_HIGH_THROUGHPUT_TOKENS_PER_S,
    DEEPSEEK_R1_HIGH_THROUGHPUT_USERS,
    DEEPSEEK_R1_TOKENS_PER_S_PER_USER,
    LLAMA_70B_DECODE_8K_TOKENS_PER_S_PER_USER,
)
from rdusim.analysis.sweep import sweep

COLUMNS = ["model", "configuration", "batch", "seq_len", "step_s", "tokens_per_s_per_user", "tokens_per_s"]


@dataclass(frozen=True)
class Configuration:
    """A line of the picture: a decode mapping (with overrides) over batch sizes."""

    label: str
    model: str
    mapping: Path
    batches: tuple[int, ...]
    overrides: tuple[str, ...] = ()            # KEY=VALUE at every point (as ``--set``)
    draft_ks: tuple[int, ...] | None = None    # speculative mappings: one line per draft length


#: DeepSeek-R1's MTP layer drafting one token (self-speculation, docs/speculative.md) at the
#: lower end of the DeepSeek-V3 report's second-token acceptance, 85-90% (M3 section 5.4.3, B.3)
MTP_K1 = "speculative={draft: mtp, k: 1, acceptance: {rate: 0.85, source: 'DeepSeek-V3 report s5.4.3: 85-90%'}}"

#: the README's picture and notebooks/06: each production mapping over the batches its
#: configuration is for (the high-speed model template runs batches 1-8, SambaStack; the
#: high-throughput one serves 256 users, R7), the high-speed one with MTP, and Llama-3.1-70B on
#: 16 sockets without and with speculative decoding (decode-sd.yaml's 1B draft at k = 3 and 9)
CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration("DeepSeek-R1 high-speed (decode-high-speed.yaml)", "DeepSeek-R1",
                  Path("mappings/deepseek-r1/decode-high-speed.yaml"), (1, 2, 4, 8, 16, 32)),
    Configuration("DeepSeek-R1 high-speed + MTP (k=1, a=0.85)", "DeepSeek-R1",
                  Path("mappings/deepseek-r1/decode-high-speed.yaml"), (1, 2, 4, 8), (MTP_K1,)),
    Configuration("DeepSeek-R1 high-throughput (decode-high-throughput.yaml)", "DeepSeek-R1",
                  Path("mappings/deepseek-r1/decode-high-throughput.yaml"), (16, 32, 64, 128, 256, 512)),
    Configuration("Llama-3.1-70B TP16, no speculative decoding (decode-tp16.yaml)", "Llama-3.1-70B",
                  Path("mappings/llama-3.1-70b/decode-tp16.yaml"), (1, 2, 4, 8, 16, 32, 64)),
    Configuration("Llama-3.1-70B + 1B draft (decode-sd.yaml)", "Llama-3.1-70B",
                  Path("mappings/llama-3.1-70b/decode-sd.yaml"), (1, 2, 4, 8, 16), draft_ks=(3, 9)),
)


def speed_throughput(configurations: tuple[Configuration, ...] | list[Configuration] = CONFIGURATIONS, *,
                     root: Path = Path("."), workers: int | None = 1) -> pd.DataFrame:
    """One row per (configuration, batch that fits): per-user and aggregate tokens/s
    (mapping paths relative to ``root``)."""
    rows = []
    for config in configurations:
        frame = sweep(root / config.mapping, None, ["none"], list(config.batches), workers=workers,
                      draft_ks=list(config.draft_ks) if config.draft_ks else None, overrides=list(config.overrides))
        frame = frame[frame["fits"]]
        for row in frame.itertuples():
            label = config.label if config.draft_ks is None else f"{config.label}, k={int(row.draft_k)}"
            rows.append({"model": config.model, "configuration": label, "batch": int(row.batch),
                         "seq_len": int(row.seq_len), "step_s": row.step_s,
                         "tokens_per_s_per_user": row.tokens_per_s / row.batch, "tokens_per_s": row.tokens_per_s})
    return pd.DataFrame(rows, columns=COLUMNS)


def published_points() -> pd.DataFrame:
    """The published figures of these configurations (hardware-and-models.md A.5): a point
    where users and aggregate are stated, else the per-user value with no aggregate."""
    users = DEEPSEEK_R1_HIGH_THROUGHPUT_USERS
    rows = [
        ("DeepSeek-R1", "R5: 198 tok/s/user", DEEPSEEK_R1_TOKENS_PER_S_PER_USER, float("nan")),
        ("DeepSeek-R1", "R7 high-speed: > 250 tok/s/user", DEEPSEEK_R1_HIGH_SPEED_TOKENS_PER_S_PER_USER, float("nan")),
        ("DeepSeek-R1", f"R7 high-throughput: ~4,500 tok/s, {users} users",
         DEEPSEEK_R1_HIGH_THROUGHPUT_TOKENS_PER_S / users, DEEPSEEK_R1_HIGH_THROUGHPUT_TOKENS_PER_S),
        ("Llama-3.1-70B", "R1 Table IV: 457 tok/s/user (speculative decoding)",
         LLAMA_70B_DECODE_8K_TOKENS_PER_S_PER_USER, float("nan")),
    ]
    return pd.DataFrame(rows, columns=["model", "label", "tokens_per_s_per_user", "tokens_per_s"])
