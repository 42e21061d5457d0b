"""Speculative decoding's acceptance model: how many tokens one draft-and-verify step yields.

Owns: ``expected_accepted``, ``accepted_tokens_per_step``, ``draw_accepted``. Imports: config, summation.

A step drafts ``k`` tokens; the target verifies them and ``k + 1`` positions at once. With a
per-token acceptance rate ``a`` (each draft token accepted with probability ``a`` given the
ones before it were; the first rejection ends the step), the step yields the accepted prefix
plus one token of the target's own (the correction at the first rejection, or the bonus token
after ``k`` accepted ones). The number of tokens is ``1 + min(G, k)`` with ``G`` geometric, so

    E[tokens per step] = sum_{i=0..k} a^i = (1 - a^(k+1)) / (1 - a),    k + 1 when a = 1

(Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative Decoding",
ICML 2023, arXiv 2211.17192, eq. 1; docs/speculative.md). ``k = 0`` is plain decoding: 1.
"""

from __future__ import annotations

from collections.abc import Callable

from rdusim.config.schema import MappingSpec
from rdusim.summation import add_in_order


def expected_accepted(rate: float, k: int) -> float:
    """Expected tokens one step yields: (1 - a^(k+1)) / (1 - a), and k + 1 at a = 1."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"acceptance rate {rate} is not in [0, 1]")
    if k < 0:
        raise ValueError(f"draft length k={k} is negative")
    if rate == 1.0:
        return float(k + 1)
    # the sum form: exact for small k and no cancellation near a = 1
    return float(add_in_order(rate ** i for i in range(k + 1)))


def draw_accepted(rate: float, k: int, uniform: Callable[[], float]) -> int:
    """Tokens one step yields for one sequence, drawn token by token with ``uniform()`` in [0, 1)."""
    accepted = 0
    while accepted < k and uniform() < rate:
        accepted += 1
    return accepted + 1  # the target's own token: the correction, or the bonus after k accepted


def accepted_tokens_per_step(spec: MappingSpec) -> float:
    """Tokens a decode step of this mapping yields per sequence: the acceptance model's expectation
    under speculative decoding, else ``workload.accepted_tokens_per_step`` (1 without MTP)."""
    sd = spec.speculative
    if sd is None:
        return spec.workload.accepted_tokens_per_step
    return expected_accepted(sd.acceptance.rate, sd.k)
