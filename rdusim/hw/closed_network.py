"""A closed queueing network of one shared server and a delay: the law both of the engine's link-sharing
kernels follow where their workers drift apart.

Owns: ``closed_network_cycle``. Imports: nothing.

Workers that each alternate a part of their own (a delay: no queue) and their bytes on one shared
link (a server) are a closed network. Simulated deterministically with the link shared max-min, equal
workers fall into step and never meet at the link until it is full: the bound, max(lone cycle, n x
service). Workers that drift and jitter do meet; the mean cycle is then the network's, by mean value
analysis (Reiser and Lavenberg, J. ACM 27(2), 1980; exact for a processor-sharing server and a delay
of any distribution, BCMP 1975), which lifts the cycle above the bound where the link begins to fill.
Used by vLLM's custom all-reduce (``rdusim.hw.custom_all_reduce``: the blocks reading from a peer, run
di) and by NCCL's p2p channels (``rdusim.hw.collectives.P2pChannels``: the channels sending, run dj);
docs/gpu.md gives both checks.
"""

from __future__ import annotations


def closed_network_cycle(delay_s: float, service_s: float, customers: int) -> float:
    """The mean cycle time of ``customers`` jobs circulating between a delay of ``delay_s`` (each its own: no
    queue) and one shared server taking ``service_s`` for each: exact mean value analysis of the closed network
    (module docstring). One customer: ``delay_s + service_s``; many: the server's ``customers x service_s``,
    approached from above."""
    queue, cycle = 0.0, delay_s + service_s
    for n in range(1, customers + 1):
        at_server = service_s * (1 + queue)
        cycle = delay_s + at_server
        queue = n * at_server / cycle
    return cycle
