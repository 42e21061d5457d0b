"""Shared fixtures: repository paths and a loaded DeepSeek prefill plan (built once)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the SN40L mapping documents (GPU mappings, kind gpu_mapping, have their own tests in tests/gpu;
#: serving deployments, kind serving, theirs in tests/serving)
MAPPINGS = sorted(p for p in (ROOT / "mappings").rglob("*.yaml") if "\nkind: mapping\n" in p.read_text())
SNAPSTREAM = ROOT / "mappings" / "deepseek-r1" / "prefill-snapstream.yaml"
LLAMA = ROOT / "mappings" / "llama-3.1-8b" / "prefill.yaml"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def snapstream_result():
    from rdusim.analysis.result import simulate

    return simulate(SNAPSTREAM, seq_len=16384)
