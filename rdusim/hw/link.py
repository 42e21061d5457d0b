"""Socket-to-socket topology: the latency steps of collectives on it.

Owns: ``latency_steps``. Imports: nothing.
The SN40L-16 topology is not public (hardware-and-models.md A.7 [A]): the default is a
logical all-to-all with a per-socket injection cap; ``ring`` is the conservative variant.
"""

from __future__ import annotations


def latency_steps(topology: str, group: int) -> int:
    """Sequential hops of one collective phase (gather or reduce) among ``group`` sockets.

    All-to-all: every peer is one hop away, so a phase is one step of parallel sends.
    Ring: a bandwidth-optimal ring needs ``group - 1`` steps.
    """
    if group <= 1:
        return 0
    return 1 if topology == "all_to_all" else group - 1
