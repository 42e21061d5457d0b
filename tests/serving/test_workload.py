"""Workload generators and trace readers: layouts, skipped rows, located errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rdusim.analysis.serving.workload import (
    generate_workload,
    parse_distribution,
    read_trace,
)
from rdusim.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data" / "serving"


def test_each_trace_layout_is_read() -> None:
    azure = read_trace(DATA / "azure.csv")
    assert azure.arrival_s == pytest.approx([0.0, 4.314579, 4.569410])
    assert list(azure.prompt_tokens) == [374, 396, 879] and list(azure.output_tokens) == [44, 109, 1]
    burst = read_trace(DATA / "burstgpt.csv", time_scale=0.5)
    assert burst.skipped == 1                                 # the 0-response-token (failed) row
    assert list(burst.arrival_s) == [0.0, 56.5] and list(burst.prompt_tokens) == [472, 417]
    moon = read_trace(DATA / "mooncake.jsonl")
    assert list(moon.arrival_s) == [0.0, 1.5] and list(moon.output_tokens) == [52, 26]
    plain = read_trace(DATA / "requests.csv", layout="plain")
    assert len(plain) == 40 and plain.arrival_s[0] == 0.0


@pytest.mark.parametrize(("text", "where"), [
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1.5,ten,5\n", ":3:2: prompt_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,10\n", ":3:3: expected 3 fields"),
    ("arrival_s,prompt_tokens,output_tokens\n-1,10,5\n", ":2:1: arrival_s"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,0\n", ":2:3: output_tokens"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_length": 5,\n',
     ":2:"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_length": 2.5, '
     '"output_length": 2}\n', ":2:18: input_length"),
])
def test_malformed_rows_are_located(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / ("t.jsonl" if text.startswith("{") else "t.csv")
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        read_trace(path)
    assert f"{path}{where}" in str(error.value)


def test_generated_workload_is_seeded_and_rate_scales_arrivals() -> None:
    prompt, output = parse_distribution("lognormal:1000,0.5", "p"), parse_distribution("uniform:1,9", "o")
    a = generate_workload(1.0, prompt, output, seed=4, requests=1000)
    b = generate_workload(2.0, prompt, output, seed=4, requests=1000)
    np.testing.assert_array_equal(a.prompt_tokens, b.prompt_tokens)
    np.testing.assert_allclose(a.arrival_s, 2 * b.arrival_s)
    assert a.output_tokens.min() >= 1 and a.output_tokens.max() <= 9
    bursty = generate_workload(1.0, prompt, output, seed=4, requests=20000, cv=3.0)
    gaps = np.diff(bursty.arrival_s)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)
    timed = generate_workload(5.0, prompt, output, seed=1, duration_s=100)
    assert timed.arrival_s.max() <= 100 and len(timed) == pytest.approx(500, rel=0.15)


@pytest.mark.parametrize("text", ["lognormal:1000", "fixed:0", "uniform:5,2", "normal:3,4", "fixed:x"])
def test_bad_distributions(text: str) -> None:
    with pytest.raises(ConfigError, match="--prompt-tokens"):
        parse_distribution(text, "--prompt-tokens")
