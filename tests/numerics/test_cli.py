"""``rdusim numerics``: outputs of a tiny run, and user errors that exit 2 without a traceback."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rdusim import cli


@pytest.mark.slow
def test_passkey_writes_table_trials_and_plot(
    model: object, tmp_path: Path
) -> None:
    out, trials, plot = tmp_path / "passkey.csv", tmp_path / "trials.csv", tmp_path / "passkey.png"
    code = cli.main([
        "numerics", "passkey", "--policy", "full,streamingllm", "--context", "256",
        "--depth", "0.5", "--trials", "1", "--budget", "64",
        "--out", str(out), "--trials-out", str(trials), "--plot", str(plot),
    ])  # fmt: skip
    assert code == 0
    table = pd.read_csv(out)
    for column in ("policy", "context", "depth", "trials", "correct", "accuracy", "cache_slots"):
        assert column in table.columns
    assert table["policy"].tolist() == ["full", "streamingllm"]
    assert table.set_index("policy").loc["streamingllm", "cache_slots"] == 64
    assert len(pd.read_csv(trials)) == 2
    assert plot.stat().st_size > 0


@pytest.mark.slow
def test_divergence_writes_three_tables(model: object, tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 30)
    prefix = tmp_path / "div"
    code = cli.main([
        "numerics", "divergence", "--policy", "snapstream", "--budget", "32",
        "--prompt-file", str(text), "--steps", "3", "--out", str(prefix),
        "--plot", str(tmp_path / "div.png"),
    ])  # fmt: skip
    assert code == 0
    steps = pd.read_csv(f"{prefix}-steps.csv")
    assert len(steps) == 3 and set(steps.columns) >= {"policy", "step", "kl", "top1_agree"}
    recall = pd.read_csv(f"{prefix}-recall.csv")
    assert len(recall) == 30 * 9 and recall["recall"].between(0, 1 + 1e-6).all()
    assert len(pd.read_csv(f"{prefix}-summary.csv")) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["passkey", "--policy", "full,nope"], "unknown KV policy 'nope'"),
        (["passkey", "--depth", "0.5,1.5"], "depth"),
        (["passkey", "--context", "100000"], "--context"),
        (["passkey", "--trials", "0"], "--trials"),
        (["divergence", "--prompt-file", "/nonexistent/text.txt"], "--prompt-file: /nonexistent/text.txt: file not found"),
        (
            ["passkey", "--policy", "snapkv", "--budget", "8", "--context", "256", "--trials", "1"],
            "budget",
        ),
    ],
)
def test_user_errors_exit_2(
    model: object, argv: list[str], message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    assert cli.main(["numerics", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
