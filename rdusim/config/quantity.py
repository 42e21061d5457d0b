"""Pydantic field types for quantities written with units in YAML.

Owns: ``Bytes``, ``BytesPerS``, ``FlopPerS``, ``Seconds``, ``Hertz``, ``Delay`` and ``Reserve``.
Imports: units.

A bare number for a field with a unit is an error: the YAML must say what it means.
Every physical quantity is finite by construction (``1e400 TB/s`` is refused). Capacities,
bandwidths, compute rates, clocks and durations are strictly positive (zero bandwidth or
compute would make a transfer or kernel never end); ``Delay`` (a latency or a per-call
cost) may be zero, which means "free": ``latency: "0 us"`` models an ideal link; so may a
``Reserve`` (HBM set aside), where zero means "nothing reserved".
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator

from rdusim.units import example_quantity, parse_quantity


def _parser(dimension: str, *, allow_zero: bool = False) -> BeforeValidator:
    def parse(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, str):
            raise ValueError(
                f"a bare number is ambiguous here; write it with its unit, "
                f"e.g. {example_quantity(dimension)!r}"
            )
        quantity = parse_quantity(value, dimension)
        if not math.isfinite(quantity):
            raise ValueError(f"{value!r} is not a finite quantity")
        if quantity < 0 or (quantity == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise ValueError(f"must be {bound}, got {value!r}")
        return quantity

    return BeforeValidator(parse)


Bytes = Annotated[float, _parser("bytes")]
BytesPerS = Annotated[float, _parser("bytes_per_s")]
FlopPerS = Annotated[float, _parser("flop_per_s")]
Seconds = Annotated[float, _parser("time")]
Hertz = Annotated[float, _parser("frequency")]
#: a latency or per-call cost: zero allowed (free), negative or infinite refused
Delay = Annotated[float, _parser("time", allow_zero=True)]
#: HBM set aside (a deployment reserve): zero allowed (nothing reserved)
Reserve = Annotated[float, _parser("bytes", allow_zero=True)]
