"""What a serving deployment's two mappings give the request engine, whichever model prices them.

Owns: ``Sides`` (step-time tables, batch buckets, KV memory and token acceptance of a
deployment's prefill and decode mappings, plus the direct step-time functions the tables
interpolate), the step-time grids, ``step_tables`` (the grids simulated, with progress) and
the rules both sides share (``check_same_policy``, ``accepted_override``).
Imports: config (the serving file, the KV policy), sim (the engine's tables). Built by
``deployment`` (SN40L mappings, the kernel simulator) and ``gpu`` (``gpu_mapping`` documents,
the GPU model).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rdusim.config.loader import Document, yaml_value
from rdusim.config.schema import KvPolicySpec
from rdusim.config.serving import ServingSpec
from rdusim.errors import ConfigError, MappingError
from rdusim.sim.serving import DecodeTable, PrefillTable

GRID_START = 1024


@dataclass(frozen=True)
class Sides:
    """The engine's inputs from a deployment's mappings. Byte counts are per device (SN40L socket or
    GPU) of the group that holds a request's cache, as ``ServingModel`` takes them."""

    prefill_table: PrefillTable
    decode_table: DecodeTable
    buckets: tuple[int, ...]             # compiled decode batches of one engine
    max_batch_reason: str
    memory: dict[str, Any]               # groups, free_bytes, bytes_per_token_socket, bytes_per_token, hbm_*
    policy: KvPolicySpec                 # the decode mapping's, which the prefill mapping's equals
    accepted_tokens_per_step: float
    seed: int
    prefill_step: Callable[[int], float]            # prompt tokens -> seconds, simulated
    decode_step: Callable[[int, int], float]        # (batch bucket, KV tokens) -> seconds, simulated
    engines_per_node: int = 1            # independent decode engines a node of the serving file holds
    prefill_engines_per_node: int = 1    # the same for a prefill node (disaggregated)
    draft_tokens: int = 0
    acceptance_rate: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


def accepted_override(spec: ServingSpec) -> list[str]:
    """The serving file's ``decode.accepted_tokens_per_step`` as an override of the decode mapping."""
    accepted = spec.decode.accepted_tokens_per_step
    return [] if accepted is None else [f"workload.accepted_tokens_per_step={yaml_value(accepted)}"]


def check_same_policy(document: Document, prefill: KvPolicySpec, decode: KvPolicySpec) -> None:
    """The decode side holds the cache the prefill side made: one KV policy and ratio, located at
    ``decode.mapping``."""
    if (prefill.name, prefill.compression) != (decode.name, decode.compression):
        line = document.lines.get(("decode", "mapping"), 1)
        raise ConfigError(f"{document.path}:{line}: decode.mapping: its KV policy {decode.name} (compression "
                          f"{decode.compression:g}) differs from the prefill mapping's {prefill.name} (compression "
                          f"{prefill.compression:g}); the decode side must hold the cache the prefill made")


def step_tables(document: Document, spec: ServingSpec, buckets: list[int], max_context: int,
                prefill_s: Callable[[int], float], decode_s: Callable[[int, int], float],
                progress: Callable[[int, int], None] | None = None) -> tuple[PrefillTable, DecodeTable]:
    """Simulate the grids (``prefill_s(prompt)``, ``decode_s(bucket, kv)``, memoised by the caller)
    and wrap them in interpolating tables."""
    prefill_grid_ = tuple(spec.prefill.grid or prefill_grid(max_context))
    kv_grid = tuple(spec.decode.kv_grid or powers_of_two(GRID_START, max_context))
    total, done = len(prefill_grid_) + len(buckets) * len(kv_grid), itertools.count(1)

    def counted(seconds: float) -> float:
        if progress is not None:
            progress(next(done), total)
        return seconds

    try:
        prefill = tuple(counted(prefill_s(n)) for n in prefill_grid_)
    except MappingError as error:
        line = document.lines.get(("prefill", "grid"), document.lines.get(("prefill", "mapping"), 1))
        raise MappingError(f"{document.path}:{line}: prefill: the prefill-time grid {list(prefill_grid_)} reaches "
                           f"a prompt the prefill mapping cannot run: {error}") from None
    decode = tuple(tuple(counted(decode_s(b, kv)) for kv in kv_grid) for b in buckets)
    return PrefillTable(prefill_grid_, prefill), DecodeTable(tuple(buckets), kv_grid, decode)


def prefill_grid(max_context: int) -> list[int]:
    """Prompt lengths to simulate: steps of sqrt(2) up to 8K, where whole chunks of the
    prefill tiles make the time less smooth (benchmarks/serve_speed.py measures the error),
    then powers of two."""
    fine = [round(GRID_START * 2 ** (k / 2)) for k in range(7)]          # 1024 ... 8192
    return sorted(set(fine[: 1 + sum(f < max_context for f in fine)] + powers_of_two(8192, max_context)))


def powers_of_two(start: int, stop: int) -> list[int]:
    grid = [start]
    while grid[-1] < stop:
        grid.append(grid[-1] * 2)
    return grid
