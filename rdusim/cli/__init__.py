"""Command-line interface: the only layer that writes files or prints results.

Owns: argument parsing, the subcommand table, turning ``RdusimError`` into a message and
exit code 2, an interruption (Ctrl-C, SIGTERM: ``rdusim.cli.progress``) into one line and
exit code 130 or 143, and any other exception (a bug) into one line and exit code 1. Imports: everything below it, but only the subcommand that runs.

Each subcommand lives in its own module with two functions, ``add_parser(subparsers)``
and ``run(args) -> int``; ``COMMANDS`` lists them in help order with their one-line help.
Subcommands load lazily: ``rdusim simulate ...`` imports ``rdusim.cli.simulate`` and what it
needs (never torch); the other subcommands appear in ``--help`` from ``COMMANDS`` alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rdusim import __version__
from rdusim.errors import RdusimError

#: subcommand -> one-line help, in the order ``rdusim --help`` lists them
COMMANDS: dict[str, str] = {
    "simulate": "simulate a YAML mapping, print the per-kernel breakdown",
    "sweep": "sweep prompt lengths, KV policies and batch sizes",
    "explore": "search for mappings that beat the shipped one",
    "numerics": "check the KV policies on a real small LM (passkey, divergence)",
    "validate": "check mapping, model and hardware YAML files",
    "calibrate": "fit calibration constants to the published figures",
    "fidelity": "every published figure vs the model: error, fitted or predicted",
    "schema": "print the JSON Schema of a document kind",
    "compare-hw": "one mapping's workload on several hardware documents (SN40L and GPUs)",
    "serve": "simulate request traffic on a serving deployment",
    "serve-sweep": "goodput of serving deployments over request rates",
}

#: exit codes: 0 ok, 1 an internal error (a bug), 2 bad input (files, options, infeasible mappings)
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130   # 128 + SIGINT (Ctrl-C)
EXIT_TERMINATED = 143    # 128 + SIGTERM
BUG_TRACKER = "the rdusim issue tracker (the project's GitHub issues)"


def command_parser(subparsers: argparse._SubParsersAction, name: str, **kwargs: object) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, with its help from ``COMMANDS``."""
    return subparsers.add_parser(name, help=COMMANDS[name], description=COMMANDS[name], **kwargs)  # type: ignore[arg-type]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``only``) one subcommand's full parser beside stubs of the others."""
    parser = argparse.ArgumentParser(
        prog="rdusim",
        description="Simulate LLM inference mappings on SN40L-style dataflow accelerators.",
    )
    parser.add_argument("--version", action="version", version=f"rdusim {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"rdusim.cli.{name.replace('-', '_')}").add_parser(subparsers)
            subparsers.choices[name].add_argument(  # also after the subcommand, where users type it
                "-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                help="no progress bars (they are shown on a terminal only)")
        else:
            subparsers.add_parser(name, help=COMMANDS[name])
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first positional word), if it is a known one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = _command(argv)
    parser = build_parser(only=command) if command else build_parser(only="")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # an option error (argparse printed it), --help or --version
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from rdusim.cli.progress import Terminated, set_quiet, signals  # noqa: PLC0415 (tqdm only when running)

    set_quiet(args.quiet)
    try:
        with signals():
            return int(args.handler(args))
    except BrokenPipeError:  # e.g. `rdusim schema mapping | head`: the reader went away
        sys.stderr.close()
        return 0
    except RdusimError as error:
        if args.debug:
            raise
        print(f"rdusim {args.command}: error:", file=sys.stderr)
        for line in str(error).split("\n"):  # not splitlines: a name may hold \x1c-\x1e or \x85
            print(f"  {line}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"rdusim {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"rdusim {args.command}: terminated (SIGTERM)", file=sys.stderr)
        return EXIT_TERMINATED
    except Exception as error:  # noqa: BLE001 (anything else is a bug: say so, once, and where to report it)
        if args.debug:
            raise
        print(f"rdusim {args.command}: internal error (a bug in rdusim, not in your input): "
              f"{type(error).__name__}: {str(error)[:300]}; please report it with the command line on "
              f"{BUG_TRACKER}; run with --debug for the traceback", file=sys.stderr)
        return EXIT_BUG
