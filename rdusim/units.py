"""SI units and the parser for quantities written with units in YAML.

Owns: unit constants, ``parse_quantity``. Imports: stdlib only.

Quantities in YAML carry their unit (``"64 GiB"``, ``"1.6 TB/s"``, ``"2 us"``,
``"638 TFLOP/s"``). Inside the code everything is SI: bytes, seconds, FLOP, and
their rates, in fields whose names end in the unit (``_bytes``, ``_s``, ``_bytes_per_s``).
"""

from __future__ import annotations

import re

KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12
KiB, MiB, GiB, TiB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
ns, us, ms = 1e-9, 1e-6, 1e-3

_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": KiB, "Mi": MiB, "Gi": GiB, "Ti": TiB}
_TIME = {"s": 1.0, "ms": ms, "us": us, "µs": us, "ns": ns}

#: dimension name -> unit suffix accepted after the SI prefix
DIMENSIONS = {
    "bytes": "B",
    "bytes_per_s": "B/s",
    "flop_per_s": "FLOP/s",
    "flop": "FLOP",
    "time": "s",
    "frequency": "Hz",
}

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµ/]+)\s*$")


def parse_quantity(text: str, dimension: str) -> float:
    """Parse ``"1.6 TB/s"`` into SI (1.6e12) for the given dimension.

    Parameters
    ----------
    text
        A number followed by a unit, e.g. ``"64 GiB"``, ``"250 GB/s"``, ``"2 us"``.
    dimension
        One of ``DIMENSIONS``: what the value measures.

    Raises
    ------
    ValueError
        With a message that says what was expected, when the unit is missing or wrong.
    """
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}")
    expected = example_quantity(dimension)
    if not isinstance(text, str):
        raise ValueError(f"expected a quantity with a unit such as {expected!r}, got {text!r}")
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"expected a quantity with a unit such as {expected!r}, got {text!r}")
    value, unit = float(match.group(1)), match.group(2)
    scale = _unit_scale(unit, dimension)
    if scale is None:
        raise ValueError(f"unit {unit!r} is not a {dimension} unit; write e.g. {expected!r}")
    return value * scale


def _unit_scale(unit: str, dimension: str) -> float | None:
    if dimension == "time":
        return _TIME.get(unit)
    suffix = DIMENSIONS[dimension]
    if not unit.endswith(suffix):
        return None
    prefix = unit[: len(unit) - len(suffix)]
    if dimension in ("bytes", "bytes_per_s") and prefix in _BINARY:
        return _BINARY[prefix]
    return _PREFIX.get(prefix)


def example_quantity(dimension: str) -> str:
    """A well-formed example of a quantity of this dimension, for error messages."""
    return {
        "bytes": "64 GiB",
        "bytes_per_s": "1.6 TB/s",
        "flop_per_s": "638 TFLOP/s",
        "flop": "1 GFLOP",
        "time": "2 us",
        "frequency": "1.2 GHz",
    }[dimension]


def format_bytes(n_bytes: float) -> str:
    """Human-readable binary size, e.g. ``format_bytes(3 * GiB) == '3.00 GiB'``."""
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.2f} {unit}"
    return f"{n_bytes:.0f} B"
