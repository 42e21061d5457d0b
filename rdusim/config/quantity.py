"""Pydantic field types for quantities written with units in YAML.

Owns: ``Bytes``, ``BytesPerS``, ``FlopPerS``, ``Seconds``, ``Hertz``. Imports: units.
A bare number for a field with a unit is an error: the YAML must say what it means.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from rdusim.units import example_quantity, parse_quantity


def _parser(dimension: str) -> BeforeValidator:
    def parse(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, str):
            raise ValueError(
                f"a bare number is ambiguous here; write it with its unit, "
                f"e.g. {example_quantity(dimension)!r}"
            )
        return parse_quantity(value, dimension)

    return BeforeValidator(parse)


Bytes = Annotated[float, _parser("bytes")]
BytesPerS = Annotated[float, _parser("bytes_per_s")]
FlopPerS = Annotated[float, _parser("flop_per_s")]
Seconds = Annotated[float, _parser("time")]
Hertz = Annotated[float, _parser("frequency")]
