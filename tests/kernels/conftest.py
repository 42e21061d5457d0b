"""Fixtures of the kernel tests: the device they run on.

``RDUSIM_TEST_DEVICE=cuda`` runs the same suite on a GPU; the default is the CPU.
"""

from __future__ import annotations

import os

import pytest
import torch


@pytest.fixture(scope="session")
def device() -> torch.device:
    """The device every kernel test builds its tensors on."""
    name = os.environ.get("RDUSIM_TEST_DEVICE", "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.fail(f"RDUSIM_TEST_DEVICE={name} but torch sees no CUDA device")
    return torch.device(name)
