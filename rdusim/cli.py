"""Command-line interface (placeholder until the simulate command lands)."""

import sys


def main(argv: list[str] | None = None) -> int:
    print("rdusim: no commands yet", file=sys.stderr)
    return 2
