"""The fuzzing suite shares the hardening tests' warm-up: every subcommand imported once."""

from tests.hardening.conftest import _imported  # noqa: F401 (an autouse fixture, registered by import)
