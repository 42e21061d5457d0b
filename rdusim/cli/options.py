"""Parsing of option values the CLI's subcommands share: comma lists, KV-policy names, and
argparse types for single numbers.

Owns: ``comma_list``, ``positive_ints``, ``policy_list`` (parsed in ``run``, raising a
``ConfigError`` that names the option), and the argparse types ``positive_int``,
``nonnegative_int``, ``bounded_int``, ``finite_float`` (checked while the options are parsed:
argparse prints ``rdusim CMD: error: argument --OPTION: MESSAGE`` and exits with 2).
Imports: errors, kv_policy. Every value is checked before any work starts.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

from rdusim.errors import ConfigError
from rdusim.kv_policy import parse_policy

T = TypeVar("T")

#: the most values of one comma-separated option: each is at least one simulation (a sweep
#: point, a serving run, a hardware row), and a sweep multiplies them
MAX_LIST_ITEMS = 1000


def comma_list(option: str, text: str, convert: Callable[[str], T], expected: str) -> list[T]:
    """The comma-separated values of ``option`` (blank items skipped; 1 to MAX_LIST_ITEMS values)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if len(parts) > MAX_LIST_ITEMS:
        raise ConfigError(f"{option}: {len(parts)} values; at most {MAX_LIST_ITEMS} (each is at least one "
                          "simulation): split the run")
    try:
        values = [convert(part) for part in parts]
    except ValueError:
        values = []
    if not values:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ConfigError(f"{option}: expected {expected}, got {shown!r}")
    return values


def positive_ints(option: str, text: str) -> list[int]:
    """Comma-separated integers > 0."""
    values = comma_list(option, text, int, "comma-separated positive integers")
    if any(v <= 0 for v in values):
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ConfigError(f"{option}: expected comma-separated positive integers, got {shown!r}")
    return values


def nonnegative_ints(option: str, text: str) -> list[int]:
    """Comma-separated integers >= 0."""
    values = comma_list(option, text, int, "comma-separated integers >= 0")
    if any(v < 0 for v in values):
        raise ConfigError(f"{option}: expected comma-separated integers >= 0, got {text!r}")
    return values


def policy_list(option: str, text: str) -> list[str]:
    """Comma-separated KV-policy names (``none`` = ``full``), each once, in order."""
    def parse(name: str) -> str:
        try:
            return parse_policy(name)
        except ValueError as error:
            raise ConfigError(f"{option}: {error}") from None

    return list(dict.fromkeys(comma_list(option, text, parse, "comma-separated KV policies")))


# ------------------------------------------------------------------ argparse types
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
