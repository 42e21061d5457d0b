"""Writing results: atomic files (nothing half-written) and the human-readable table.

Owns: ``write_atomic``, ``format_table``. Imports: analysis results, pandas.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rdusim.analysis.result import SimulationResult
from rdusim.errors import ConfigError
from rdusim.units import format_bytes


def write_atomic(path: str | Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename over ``path``."""
    write_atomic_binary(path, text.encode("utf-8"))


def write_atomic_binary(path: str | Path, data: bytes) -> None:
    path = Path(path)
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: folder {str(path.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def format_table(result: SimulationResult) -> str:
    plan = result.plan
    spec = plan.mapping
    lines = [
        f"{spec.name}: {plan.model.name} {plan.phase} on {plan.system.name} "
        f"({plan.system.sockets} sockets), seq_len={plan.seq_len}, batch={plan.batch}, "
        f"kv_policy={spec.kv_policy.name} (kv_len={plan.kv_len})", "",
        f"{'kernel':<24} {'layer':<6} {'calls':>5} {'latency ms':>11} {'share':>7} {'compute ms':>11} "
        f"{'memory ms':>10} {'comm ms':>9} {'bound':<8} {'PCU%':>5} {'HBM%':>5}",
    ]
    for row in result.kernels.itertuples():
        lines.append(
            f"{row.kernel:<24} {row.layer_type:<6} {row.calls:>5} {row.latency_s * 1e3:>11.3f} "
            f"{row.share * 100:>6.2f}% {row.compute_s * 1e3:>11.3f} {row.memory_s * 1e3:>10.3f} "
            f"{row.comm_s * 1e3:>9.3f} {row.bound:<8} {row.pcu_util * 100:>5.1f} {row.hbm_util * 100:>5.1f}")
    label = "time to first token" if plan.phase == "prefill" else "decode step"
    lines += ["", f"{label}: {result.total_s * 1e3:.3f} ms  (share = fraction of its layer type's time)", "",
              "memory per socket (each of the symmetric sockets):"]
    for tier, uses in result.memory.items():
        used = {u: b for u, b in uses.items() if b > 0}
        if used:
            capacity = plan.system.socket.capacity_bytes(tier)
            parts = ", ".join(f"{u} {format_bytes(b)}" for u, b in used.items())
            lines.append(f"  {tier.upper():<4} {format_bytes(sum(used.values())):>11} of {format_bytes(capacity)}: {parts}")
    return "\n".join(lines) + "\n"
