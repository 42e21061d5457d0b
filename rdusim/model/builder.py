"""A small builder for the ops of one layer: tensor helpers and GEMM/norm shorthands.

Owns: ``LayerBuilder``, ``Dtypes``, ``dtypes``. Imports: ops, config.
"""

from __future__ import annotations

from dataclasses import dataclass

from rdusim.config.schema import DTYPE_BYTES, ModelSpec
from rdusim.model.ops import Op, TensorUse


@dataclass(frozen=True)
class Dtypes:
    weight: int
    act: int
    kv: int


class LayerBuilder:
    """Accumulates ops of one layer; ``sizes`` is shared by every op of the layer."""

    def __init__(self, sizes: dict[str, int], dt: Dtypes) -> None:
        self.sizes = sizes
        self.dt = dt
        self.ops: list[Op] = []

    def act(self, name: str, *dims: str, nbytes: int | None = None) -> TensorUse:
        return TensorUse(name, dims, "activation", nbytes or self.dt.act)

    def weight(self, name: str, *dims: str, factor: float = 1.0, nbytes: int | None = None) -> TensorUse:
        return TensorUse(name, dims, "weight", nbytes or self.dt.weight, factor)

    def kv(self, name: str, *dims: str) -> TensorUse:
        return TensorUse(name, dims, "kv", self.dt.kv)

    def add(self, name: str, op_class: str, loop: tuple[str, ...], wpp: float,
            reads: tuple[TensorUse, ...], writes: tuple[TensorUse, ...], **kw: object) -> None:
        self.ops.append(Op(name, op_class, self.sizes, loop, wpp, reads, writes, **kw))  # type: ignore[arg-type]

    def gemm(self, name: str, x: TensorUse, w: TensorUse, y: TensorUse, k: tuple[str, ...],
             wpp: float = 2.0, **kw: object) -> None:
        # the loop nest is the output's dimensions plus the contracted ones (weight-only
        # dimensions such as ``experts`` select a matrix, they are not looped over)
        loop = tuple(dict.fromkeys(y.dims + k))
        self.add(name, "gemm", loop, wpp, (x, w), (y,), reduce=k, **kw)

    def norm(self, name: str, x: TensorUse, y: TensorUse, width: str, **kw: object) -> None:
        # RMSNorm over ``width``: square, sum, rsqrt, scale (4 element ops), plus the weight
        # vector (``width`` elements, the same for every row: replicated under TP)
        self.add(name, "elementwise", y.dims, 4.0, (x, self.weight(f"w_{name}", width)), (y,), **kw)


def dtypes(model: ModelSpec) -> Dtypes:
    return Dtypes(
        DTYPE_BYTES[model.dtypes.weights],
        DTYPE_BYTES[model.dtypes.activations],
        DTYPE_BYTES[model.dtypes.kv],
    )
