"""Checks of the tensors and integers that every cache takes, with exact ``ValueError`` messages.

Owns: ``PrefillShape``, ``check_prefill``, ``check_step``, ``check_query``, ``check_int``,
``check_pool``, ``check_flag``, ``check_choice``. Imports: torch.

Shape checks read only static shapes, dtypes and devices. The one data-dependent check, that
every length lies in ``[0, T]``, runs once per prefill (a single host sync), never per decode step.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class PrefillShape(NamedTuple):
    """The static sizes of a prefill batch (letters as in the docstrings: B, Hkv, Hq, G, T)."""

    batch: int
    kv_heads: int
    q_heads: int
    group: int
    tokens: int
    key_dim: int
    value_dim: int


def check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` if it is an ``int`` (not a bool) of at least ``minimum``, else raise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def check_flag(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool``, else raise (a truthy string is not a flag)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_pool(pool: object) -> int:
    """Return the pooling kernel if it is a positive odd int (even kernels change the length)."""
    check_int("pool", pool, 1)
    assert isinstance(pool, int)
    if pool % 2 == 0:
        raise ValueError(f"pool must be odd so that padding pool // 2 keeps the length, got {pool}")
    return pool


def check_prefill(keys: Tensor, values: Tensor, queries: Tensor, lengths: Tensor) -> PrefillShape:
    """Validate a right-padded prefill batch and return its sizes.

    Shapes
    ------
    keys (B, Hkv, T, Dk), values (B, Hkv, T, Dv), queries (B, Hq, T, Dk), lengths (B,) int64,
    with Hq a multiple of Hkv, T >= 1 and every length in [0, T].
    """
    if keys.dim() != 4:
        raise ValueError(
            f"keys must be a 4-D tensor (B, Hkv, T, Dk), got shape {tuple(keys.shape)}"
        )
    b, hkv, t, dk = keys.shape
    if min(b, hkv, t) < 1:
        raise ValueError(
            f"keys must hold at least one sequence, head and token, got {tuple(keys.shape)}"
        )
    if values.dim() != 4 or tuple(values.shape[:3]) != (b, hkv, t):
        raise ValueError(
            f"values must have shape (B, Hkv, T, Dv) = ({b}, {hkv}, {t}, Dv), "
            f"got {tuple(values.shape)}"
        )
    if queries.dim() != 4 or queries.shape[0] != b or tuple(queries.shape[2:]) != (t, dk):
        raise ValueError(
            f"queries must have shape (B, Hq, T, Dk) = ({b}, Hq, {t}, {dk}), "
            f"got {tuple(queries.shape)}"
        )
    hq = queries.shape[1]
    _check_heads(hq, hkv)
    _check_dtypes_devices(keys, values, queries)
    _check_lengths(lengths, b, t, keys.device)
    return PrefillShape(b, hkv, hq, hq // hkv, t, dk, values.shape[3])


def check_step(keys: Tensor, values: Tensor, k_new: Tensor, v_new: Tensor) -> None:
    """Validate one decode token against the cache buffers ``keys`` (B, Hkv, C, Dk) and
    ``values`` (B, Hkv, C, Dv): ``k_new`` must be (B, Hkv, 1, Dk) and ``v_new`` (B, Hkv, 1, Dv),
    with the cache's dtype and device."""
    b, hkv, _, dk = keys.shape
    dv = values.shape[3]
    for name, new, dim in (("k_new", k_new, dk), ("v_new", v_new, dv)):
        if tuple(new.shape) != (b, hkv, 1, dim):
            raise ValueError(
                f"{name} must have shape (B, Hkv, 1, D) = ({b}, {hkv}, 1, {dim}), "
                f"got {tuple(new.shape)}"
            )
        if new.dtype != keys.dtype or new.device != keys.device:
            raise ValueError(
                f"{name} must be {keys.dtype} on {keys.device} like the cache, "
                f"got {new.dtype} on {new.device}"
            )


def check_query(q_new: Tensor, keys: Tensor) -> None:
    """Validate a decode query (B, Hq, 1, Dk) against the key buffer (B, Hkv, C, Dk)."""
    b, hkv, _, dk = keys.shape
    if q_new.dim() != 4 or q_new.shape[0] != b or tuple(q_new.shape[2:]) != (1, dk):
        raise ValueError(
            f"q_new must have shape (B, Hq, 1, Dk) = ({b}, Hq, 1, {dk}), got {tuple(q_new.shape)}"
        )
    _check_heads(q_new.shape[1], hkv)
    if q_new.dtype != keys.dtype or q_new.device != keys.device:
        raise ValueError(
            f"q_new must be {keys.dtype} on {keys.device} like the cache, "
            f"got {q_new.dtype} on {q_new.device}"
        )


def _check_heads(hq: int, hkv: int) -> None:
    if hq < 1 or hq % hkv != 0:
        raise ValueError(f"query heads ({hq}) must be a positive multiple of KV heads ({hkv})")


def _check_dtypes_devices(keys: Tensor, values: Tensor, queries: Tensor) -> None:
    dtypes = {keys.dtype, values.dtype, queries.dtype}
    if len(dtypes) != 1 or not keys.dtype.is_floating_point:
        names = ", ".join(str(x.dtype) for x in (keys, values, queries))
        raise ValueError(f"keys, values and queries must share one floating dtype, got {names}")
    if len({keys.device, values.device, queries.device}) != 1:
        names = ", ".join(str(x.device) for x in (keys, values, queries))
        raise ValueError(f"keys, values and queries must be on one device, got {names}")


def _check_lengths(lengths: Tensor, batch: int, tokens: int, device: torch.device) -> None:
    if lengths.dtype != torch.int64 or tuple(lengths.shape) != (batch,):
        raise ValueError(
            f"lengths must be an int64 tensor of shape (B,) = ({batch},), "
            f"got {lengths.dtype} of shape {tuple(lengths.shape)}"
        )
    if lengths.device != device:
        raise ValueError(f"lengths must be on {device} like keys, got {lengths.device}")
    # The only data-dependent check: one host sync per prefill, never per decode step.
    low, high = int(lengths.min()), int(lengths.max())
    if low < 0 or high > tokens:
        raise ValueError(
            f"lengths must lie in [0, T] = [0, {tokens}], got values in [{low}, {high}]"
        )
