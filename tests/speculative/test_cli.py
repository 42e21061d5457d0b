"""Speculative decoding through the commands: simulate's report, sweep's draft-length axis."""

from __future__ import annotations

import json

import pytest
import yaml

from rdusim.analysis.result import simulate
from rdusim.analysis.sweep import sweep
from rdusim.cli import main
from rdusim.model.speculative import expected_accepted
from tests.speculative.test_step import SD, _mapping


@pytest.fixture(scope="module")
def sd_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    path = _mapping(folder, "sd", speculative=SD)
    # 8 GiB of HBM per socket, so the sweep's maximum batch is found in a few builds
    socket = yaml.safe_load((folder / "socket.yaml").read_text())
    socket["memory"]["hbm"]["capacity"] = "8 GiB"
    (folder / "socket.yaml").write_text(yaml.safe_dump(socket, sort_keys=False))
    return path


def _plain(folder, name):
    """A plain mapping beside ``sd_path`` (written before the socket is read again: same socket)."""
    text = (folder / "sd.yaml").read_text()
    data = yaml.safe_load(text)
    del data["speculative"]
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_simulate_reports_the_split_and_accepted_tokens(sd_path, capsys):
    assert main(["simulate", str(sd_path)]) == 0
    text = capsys.readouterr().out
    assert "speculative: draft llama-3.2-1b, k=3, acceptance rate 0.5 (test input)" in text
    assert "accepted tokens per step 1.875" in text and "draft dense" in text
    assert main(["simulate", str(sd_path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["speculative"]
    assert data["k"] == 3 and data["accepted_tokens_per_step"] == pytest.approx(1.875)
    assert data["draft_s"] + data["verify_s"] == pytest.approx(json.loads(
        json.dumps(simulate(sd_path).to_dict()))["total_s"], rel=1e-12)


def test_sweep_draft_length_axis(sd_path):
    frame = sweep(sd_path, [256], ["none"], [1, 2], workers=1, draft_ks=[0, 2, 3])
    assert list(frame["draft_k"]) == [0, 0, 2, 2, 3, 3]
    for row in frame.itertuples():
        assert row.accepted_tokens_per_step == pytest.approx(expected_accepted(0.5, row.draft_k))
        assert row.draft_s + row.verify_s == pytest.approx(row.step_s, rel=1e-12)
        assert row.tokens_per_s == pytest.approx(row.batch * row.tokens_per_s_per_user, rel=1e-12)
        assert row.tpot_s == pytest.approx(row.step_s / row.accepted_tokens_per_step, rel=1e-12)
    plain = simulate(_plain(sd_path.parent, "plain-sweep"), batch=2)
    k0 = frame[(frame["draft_k"] == 0) & (frame["batch"] == 2)].iloc[0]
    assert k0.step_s == plain.total_s and k0.draft_s == 0.0


def test_sweep_draft_k_needs_a_speculative_mapping(sd_path, capsys):
    plain = _plain(sd_path.parent, "plain-cli")
    assert main(["sweep", str(plain), "--seq-len", "256", "--batch", "1", "--draft-k", "3", "--workers", "1"]) == 2
    assert "--draft-k" in capsys.readouterr().err
    assert main(["sweep", str(sd_path), "--seq-len", "256", "--batch", "1", "--draft-k", "-1", "--workers", "1"]) == 2
