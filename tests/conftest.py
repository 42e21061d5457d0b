"""Shared fixtures: repository paths and a loaded DeepSeek prefill plan (built once); the
Hypothesis profiles.

Profiles: ``fast`` (the default, used by ``make test``): few, derandomized examples, so the
suite is quick and repeatable; ``long`` (``pytest --hypothesis-profile=long``): many random
examples for deeper fuzzing. Neither has a deadline: on a loaded machine a slow example is
not a failure (the fuzz contract bounds time itself). Tests that set their own settings
(the kernel tests) keep them under both profiles.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("fast", max_examples=20, deadline=None, derandomize=True, suppress_health_check=_SLOW_OK,
                          database=None)
settings.register_profile("long", max_examples=400, deadline=None, suppress_health_check=_SLOW_OK)
settings.load_profile("fast")

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
