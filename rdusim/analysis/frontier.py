"""Configured for speed or for throughput: tokens/s per user against aggregate tokens/s.

Owns: ``Configuration``, ``CONFIGURATIONS``, ``speed_throughput``, ``published_points``. Imports: sweep,
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


#: the README's picture and notebooks/06: each production mapping over the batches its
#: configuration is for (the high-speed model template runs batches 1-8, SambaStack; the
#: high-throughput one serves 256 users, R7), and the 16-socket Llama-3.1-70B mapping
CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration("DeepSeek-R1 high-speed (decode-high-speed.yaml)", "DeepSeek-R1",
                  Path("mappings/deepseek-r1/decode-high-speed.yaml"), (1, 2, 4, 8, 16, 32)),
    Configuration("DeepSeek-R1 high-throughput (decode-high-throughput.yaml)", "DeepSeek-R1",
                  Path("mappings/deepseek-r1/decode-high-throughput.yaml"), (16, 32, 64, 128, 256, 512)),
    Configuration("Llama-3.1-70B TP16, no speculative decoding (decode-tp16.yaml)", "Llama-3.1-70B",
                  Path("mappings/llama-3.1-70b/decode-tp16.yaml"), (1, 2, 4, 8, 16, 32, 64)),
)


def speed_throughput(configurations: tuple[Configuration, ...] | list[Configuration] = CONFIGURATIONS, *,
                     root: Path = Path("."), workers: int | None = 1) -> pd.DataFrame:
    """One row per (configuration, batch that fits): per-user and aggregate tokens/s
    (mapping paths relative to ``root``)."""
    rows = []
    for config in configurations:
        frame = sweep(root / config.mapping, None, ["none"], list(config.batches), workers=workers)
        frame = frame[frame["fits"]]
        for row in frame.itertuples():
            rows.append({"model": config.model, "configuration": config.label, "batch": int(row.batch),
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
