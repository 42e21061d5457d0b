"""rdusim: a discrete-event simulator and mapping explorer for LLM inference on dataflow sockets.

The public API, imported on first use so that ``import rdusim`` stays light:

- ``rdusim.simulate(mapping, *, seq_len=None, batch=None, hw=None, overrides=None)`` ->
  ``SimulationResult`` (``.kernels`` DataFrame, ``.memory``, ``.total_s``, ``.to_dict()``)
- ``rdusim.load_mapping(path, ...)``, ``rdusim.build_plan(loaded)``
- ``rdusim.sweep(mapping, seq_lens, policies, batches)`` -> tidy DataFrame
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "simulate": "rdusim.analysis.result",
    "SimulationResult": "rdusim.analysis.result",
    "sweep": "rdusim.analysis.sweep",
    "load_mapping": "rdusim.mapping.bundle",
    "build_plan": "rdusim.mapping.build",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rdusim' has no attribute {name!r}")
