"""Command-line interface: the only layer that writes files or prints results.

Owns: argument parsing, the subcommand table, turning ``RdusimError`` into a message and
exit code 2. Imports: everything below it.

Each subcommand lives in its own module with two functions, ``add_parser(subparsers)``
and ``run(args) -> int``; ``COMMANDS`` lists those modules in help order.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from rdusim import __version__
from rdusim.errors import RdusimError

#: subcommand modules under rdusim.cli, in the order ``rdusim --help`` lists them
COMMANDS: tuple[str, ...] = ("simulate", "sweep", "explore", "numerics", "validate", "calibrate", "schema",
                             "serve", "serve_sweep")

EXIT_USAGE = 2


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"rdusim.cli.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rdusim",
        description="Simulate LLM inference mappings on SN40L-style dataflow accelerators.",
    )
    parser.add_argument("--version", action="version", version=f"rdusim {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        _load(name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # e.g. `rdusim schema mapping | head`: the reader went away
        sys.stderr.close()
        return 0
    except RdusimError as error:
        if args.debug:
            raise
        print(f"rdusim {args.command}: error:", file=sys.stderr)
        for line in str(error).splitlines():
            print(f"  {line}", file=sys.stderr)
        return EXIT_USAGE
