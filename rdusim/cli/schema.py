"""``rdusim schema KIND``: print the JSON Schema of a YAML document kind (from pydantic)."""

from __future__ import annotations

import argparse
import json

from rdusim.cli import command_parser
from rdusim.config.loader import DOCUMENT_KINDS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "schema")
    parser.add_argument("kind", choices=sorted(DOCUMENT_KINDS))
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(DOCUMENT_KINDS[args.kind].model_json_schema(by_alias=True), indent=2))
    return 0
