"""``rdusim validate PATH...``: check YAML documents (files or folders) without simulating.

A mapping is also built against its model and hardware, so infeasible mappings (SRAM,
degrees) are reported here too; a GPU mapping is loaded with its model and node (TP degree,
layout, layer list, MTP). Every problem in every file is listed; exit code 2 if any.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rdusim.cli import command_parser
from rdusim.config.loader import load_any
from rdusim.config.schema import GpuMappingSpec, MappingSpec
from rdusim.errors import ConfigError, RdusimError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "validate")
    parser.add_argument("paths", nargs="+", help="YAML files or folders (searched recursively)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    files = _collect(args.paths)
    issues: list[str] = []
    for path in files:
        try:
            spec = load_any(path)
            if isinstance(spec, MappingSpec):
                build_plan(load_mapping(path))
            elif isinstance(spec, GpuMappingSpec):  # its node, model and layout rules
                from rdusim.analysis.gpu.predict import load_gpu_mapping

                load_gpu_mapping(path)
            print(f"ok    {path}")
        except RdusimError as error:
            print(f"FAIL  {path}")
            issues += str(error).split("\n")  # not splitlines: a name may hold \x1e
    if issues:
        raise ConfigError(issues)
    print(f"{len(files)} file(s) valid")
    return 0


def _collect(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for name in paths:
        if not name.strip():
            raise ConfigError(f"{name!r}: an empty path; expected a YAML file or folder")
        path = Path(name)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.y*ml") if p.suffix in (".yaml", ".yml"))
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"{path}: file not found")
    return files
