"""Parsing of option values the CLI's subcommands share: comma lists and KV-policy names.

Owns: ``comma_list``, ``positive_ints``, ``policy_list``. Imports: errors, kv_policy.
Every parser names the option in its ``ConfigError`` (exit 2), so a message says which
option was wrong and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rdusim.errors import ConfigError
from rdusim.kv_policy import parse_policy

T = TypeVar("T")


def comma_list(option: str, text: str, convert: Callable[[str], T], expected: str) -> list[T]:
    """The comma-separated values of ``option`` (blank items skipped; at least one value)."""
    try:
        values = [convert(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values:
        raise ConfigError(f"{option}: expected {expected}, got {text!r}")
    return values


def positive_ints(option: str, text: str) -> list[int]:
    """Comma-separated integers > 0."""
    values = comma_list(option, text, int, "comma-separated positive integers")
    if any(v <= 0 for v in values):
        raise ConfigError(f"{option}: expected comma-separated positive integers, got {text!r}")
    return values


def policy_list(option: str, text: str) -> list[str]:
    """Comma-separated KV-policy names (``none`` = ``full``), each once, in order."""
    def parse(name: str) -> str:
        try:
            return parse_policy(name)
        except ValueError as error:
            raise ConfigError(f"{option}: {error}") from None

    return list(dict.fromkeys(comma_list(option, text, parse, "comma-separated KV policies")))
