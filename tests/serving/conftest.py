"""Synthetic deployments for the request engine: closed-form step times, no kernel simulation."""

from __future__ import annotations

import pytest

from rdusim.sim.serving import ServingModel


def constant(value: float):
    return lambda *_: value


def synthetic_model(**changes) -> ServingModel:
    base = dict(layout="disaggregated", prefill_nodes=1, decode_nodes=1, prefill_time=constant(1.0),
                decode_step_time=lambda bucket, kv: 0.125 * bucket, kept_tokens=lambda p: p, kv_grows=True,
                batch_buckets=(1, 2), kv_groups=1, kv_bytes_per_group=1e12, kv_bytes_per_token=1000.0,
                shipped_bytes_per_token=1000.0, accepted_tokens_per_step=1.0, link_bytes_per_s=8e5,
                link_latency_s=0.0)
    return ServingModel(**(base | changes))


@pytest.fixture
def model() -> ServingModel:
    return synthetic_model()
