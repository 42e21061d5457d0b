"""Operator records: what one op of a layer computes and which tensors it moves.

Owns: ``TensorUse``, ``Op`` and their FLOP/byte accounting. Imports: config (dtype sizes).

An op is a loop nest over named dimensions (``seq``, ``heads``, ``hidden`` ...). Its work is
``work_per_point * prod(loop dims)`` (halved for causal attention); each tensor's bytes are
``prod(its dims) * factor * dtype_bytes``. Sharding a dimension by a degree divides the work
and every tensor that has that dimension; a sharded ``reduce`` dimension leaves partial sums.
These two rules are all the mapping layer needs to derive per-socket costs and collectives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rdusim.config.schema import OpClass

Role = Literal["weight", "activation", "kv"]


@dataclass(frozen=True)
class TensorUse:
    """A tensor an op reads or writes. ``factor`` counts copies (e.g. 3 matrices of an expert)."""

    name: str
    dims: tuple[str, ...]
    role: Role
    dtype_bytes: int
    factor: float = 1.0

    def nbytes(self, sizes: dict[str, int], shard: dict[str, int] | None = None) -> float:
        """Bytes of this tensor, per socket when ``shard`` gives degrees per dimension."""
        shard = shard or {}
        elements = math.prod(sizes[d] / shard.get(d, 1) for d in self.dims)
        return elements * self.factor * self.dtype_bytes


@dataclass(frozen=True)
class Op:
    """One operator of a layer graph.

    Attributes
    ----------
    loop
        Dimensions whose product, times ``work_per_point``, is the op's work
        (FLOPs for gemm/attention, element operations for elementwise/sort).
    reduce
        Loop dimensions contracted away: sharding one leaves partial sums to reduce.
    tp_dim
        The dimension tensor parallelism splits for this op (None: replicated under TP).
    causal
        Attention over ``kv_seq`` restricted to earlier tokens (work x (T+1)/(2T)).
    routed
        MoE routed experts: work follows the token-to-expert routing of the batch.
    is_barrier
        A global op (e.g. top-K over all candidates): it starts only once every chunk of
        its inputs has arrived, and releases all its chunks at once.
    parallel_dims
        For an op that is one indivisible problem per instance (a sort network over a
        whole vector), the dimensions that index independent instances: it can use at
        most one PCU per instance. ``None``: every loop point is independent.
    whole_operand
        The op needs a whole sequence's operand on chip at once (a concatenation or selection
        whose layout spans the sequence): its buffers hold at least one sequence, however
        the kernel is chunked.
    attach_to
        An op a KV policy adds: unless the mapping places it, it joins the kernel of the
        op named here (e.g. ``attention``).
    """

    name: str
    op_class: OpClass
    sizes: dict[str, int]
    loop: tuple[str, ...]
    work_per_point: float
    reads: tuple[TensorUse, ...]
    writes: tuple[TensorUse, ...]
    reduce: tuple[str, ...] = ()
    tp_dim: str | None = None
    causal: bool = False
    routed: bool = False
    is_barrier: bool = False
    parallel_dims: tuple[str, ...] | None = None
    attach_to: str | None = None
    whole_operand: bool = False

    def work(self, shard: dict[str, int] | None = None) -> float:
        """Work of the op (per socket under ``shard``)."""
        shard = shard or {}
        points = math.prod(self.sizes[d] / shard.get(d, 1) for d in self.loop)
        return self.work_per_point * points * self.causal_fraction()

    def max_pcus(self, shard: dict[str, int] | None = None) -> int | None:
        """PCUs the op can use at most (independent instances per socket), or None."""
        if self.parallel_dims is None:
            return None
        shard = shard or {}
        return max(1, math.prod(self.sizes[d] // shard.get(d, 1) for d in self.parallel_dims))

    def causal_fraction(self) -> float:
        if not self.causal:
            return 1.0
        seq = self.sizes["seq"]
        return (seq + 1) / (2 * seq)

    def bytes_by_role(self, shard: dict[str, int] | None = None) -> dict[str, float]:
        """Bytes read plus written, by role (weight, activation, kv)."""
        total: dict[str, float] = {"weight": 0.0, "activation": 0.0, "kv": 0.0}
        for tensor in self.reads + self.writes:
            total[tensor.role] += tensor.nbytes(self.sizes, shard)
        return total

    def tensor(self, name: str) -> TensorUse:
        for tensor in self.reads + self.writes:
            if tensor.name == name:
                return tensor
        raise KeyError(f"op {self.name!r} has no tensor {name!r}")
