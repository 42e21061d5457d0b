"""Option types for argparse: every number and list is checked while the options are parsed,
before any work starts, and a bad one is reported with its option name (exit code 2).

Owns: ``positive_int``, ``nonnegative_int``, ``positive_ints``, ``finite_float``,
``compression``, ``names``. Imports: nothing from rdusim.

argparse prints ``rdusim CMD: error: argument --OPTION: MESSAGE`` and exits with 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _integer(text: str) -> int:
    try:
        return int(text.strip().replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def bounded_int(limit: int, why: str) -> Callable[[str], int]:
    """A positive integer no larger than ``limit`` (``why`` explains the limit)."""

    def parse(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"{value} is more than {limit} ({why})")
        return value

    return parse


def positive_ints(text: str) -> list[int]:
    """A comma-separated list of positive integers, at least one."""
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    try:
        return [positive_int(part) for part in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None


def finite_float(minimum: float | None = None, *, exclusive: bool = False) -> Callable[[str], float]:
    """A finite number (no nan or inf), optionally above ``minimum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if minimum is not None and (value < minimum or (exclusive and value == minimum)):
            raise argparse.ArgumentTypeError(f"expected a number {'>' if exclusive else '>='} {minimum:g}, "
                                             f"got {text!r}")
        return value

    return parse


def names(text: str) -> list[str]:
    """A comma-separated list of names, at least one."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected one or more comma-separated names, got {text!r}")
    return parts
