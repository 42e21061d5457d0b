"""The names of the KV-cache policies, shared by the kernels, the simulator and the CLI.

Owns: ``POLICY_NAMES`` and their one-line descriptions. Imports: nothing.
This module is torch-free on purpose: the simulator and the CLI validate a policy
name here without loading ``rdusim.kernels``; ``rdusim.kernels.POLICIES`` registers one
implementation under each of these names (a test checks the two lists are equal).
"""

from __future__ import annotations

POLICY_DESCRIPTIONS: dict[str, str] = {
    "full": "keep every token (no compression)",
    "streamingllm": "attention sinks + a ring buffer of recent tokens (SnapStream with K = 0)",
    "snapkv": "one-time prefill compression by observation-window votes, then append",
    "snapstream": "SnapKV at prefill + StreamingLLM ring buffer at decode, fixed size",
    "h2o": "heavy hitters by accumulated attention + recent tokens, fixed budget",
    "longflow": "static cache; each step overwrites the slot with the smallest alpha*|v|_1",
    "kascade": "sparse attention: anchor layers pick top-k keys that reuse layers attend to",
}

POLICY_NAMES: tuple[str, ...] = tuple(POLICY_DESCRIPTIONS)
