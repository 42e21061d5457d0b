"""The fuzzing suite shares the hardening tests' warm-up (every subcommand imported once) and
builds the shipped serving file's step-time tables once, so that a serving example measures its
run, not the tables (tens of seconds on a loaded machine)."""

import pytest

from tests.hardening.conftest import _imported  # noqa: F401 (an autouse fixture, registered by import)


@pytest.fixture(scope="session", autouse=True)
def _serving_tables() -> None:
    from rdusim.analysis.serving.deployment import load_deployment  # noqa: PLC0415
    from tests.fuzz.strategies import SERVE  # noqa: PLC0415

    load_deployment(SERVE)
