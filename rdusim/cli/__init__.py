"""Command-line interface: the only layer that writes files or prints results.

Owns: argument parsing, the subcommand table, turning ``RdusimError`` into a message and
exit code 2, and any other exception (a bug) into one line and exit code 1. Imports: everything below it.

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
COMMANDS: tuple[str, ...] = ("simulate", "sweep", "explore", "numerics", "validate", "calibrate", "schema")

#: exit codes: 0 ok, 1 an internal error (a bug), 2 bad input (files, options, infeasible mappings)
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
BUG_TRACKER = "the rdusim issue tracker (the project's GitHub issues)"


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
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # an option error (argparse printed it), --help or --version
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
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
    except KeyboardInterrupt:
        print(f"rdusim {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 (anything else is a bug: say so, once, and where to report it)
        if args.debug:
            raise
        print(f"rdusim {args.command}: internal error (a bug in rdusim, not in your input): "
              f"{type(error).__name__}: {str(error)[:300]}; please report it with the command line on "
              f"{BUG_TRACKER}; run with --debug for the traceback", file=sys.stderr)
        return EXIT_BUG
