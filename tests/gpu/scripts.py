"""The scripts under benchmarks/gpu, loaded as modules for the tests (benchmarks/ is not a package)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "benchmarks/gpu"


def bench_script(name: str) -> ModuleType:
    """benchmarks/gpu/NAME.py as a fresh module named ``bench_NAME``: registered in sys.modules
    (dataclasses look their module up there), with benchmarks/gpu on sys.path for the scripts that
    import a sibling (collectives_parity imports collectives, small_predicted compare_sweep)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def doc_block(marker: str) -> list[str]:
    """The lines between docs/gpu.md's ``<!-- MARKER:start -->`` and ``<!-- MARKER:end -->``."""
    text = (ROOT / "docs/gpu.md").read_text()
    m = re.search(rf"<!-- {marker}:start -->\n(.*?)\n<!-- {marker}:end -->", text, re.S)
    assert m, marker
    return m.group(1).splitlines()
