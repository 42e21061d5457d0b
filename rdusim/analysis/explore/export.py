"""The explorer's starting points and what it hands back: shipped seed mappings, and a found
mapping as a document that loads from anywhere.

Owns: ``seed_mapping``, ``standalone_document``. Imports: errors, search (the result type).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rdusim.analysis.explore.search import ExploreResult
from rdusim.analysis.explore.tasks import Genome
from rdusim.errors import ConfigError


def seed_mapping(model: str, phase: str, policy: str, root: Path | None = None) -> Path:
    """The shipped mapping for a model and phase: ``mappings/<model>/<phase>[-<policy>].yaml``."""
    roots = [root] if root else [Path.cwd() / "mappings", Path(__file__).resolve().parents[2] / "mappings"]
    base = next((r for r in roots if r.is_dir()), roots[-1])
    known = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    if model not in known:
        raise ConfigError(f"--model: unknown model {model!r}; models with shipped mappings: {', '.join(known)}")
    suffix = "" if policy == "full" else f"-{policy}"
    path = base / model / f"{phase}{suffix}.yaml"
    if not path.is_file():
        shipped = sorted(p.stem for p in (base / model).glob("*.yaml"))
        raise ConfigError(f"--model {model}: no shipped {phase} mapping with policy {policy!r} ({path} not found; "
                          f"shipped: {', '.join(shipped)}); pass --mapping to start from another")
    return path


def standalone_document(result: ExploreResult, genome: Genome) -> dict[str, Any]:
    """A candidate's mapping with file references made absolute, so it loads from anywhere."""
    data = dict(result.documents[genome])
    base = result.space.seed_path.parent
    for key in ("hardware", "prefill"):
        if data.get(key):
            data[key] = str((base / data[key]).resolve())
    speculative = data.get("speculative")
    if isinstance(speculative, dict) and speculative.get("mapping"):  # a named draft mapping
        data["speculative"] = speculative | {"mapping": str((base / speculative["mapping"]).resolve())}
    data["name"] = f"{data['name']}-explored"
    return data
