"""The fuzzing suite: mutated shipped documents and generated command lines keep the contract
(``strategies.check_contract``). ``make test`` runs a small, derandomized set of examples (the
``fast`` profile of tests/conftest.py); ``pytest tests/fuzz --hypothesis-profile=long`` runs
many more, randomly, for deeper checks. Time is bounded by the contract's guard, not by
Hypothesis deadlines (a loaded machine must not make the suite flaky)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rdusim.analysis.serving.workload import read_trace
from tests.fuzz.strategies import (
    NEWLINES,
    SERVE,
    check_contract,
    cli_argvs,
    kind_of,
    mutated_documents,
    traces,
    valid_traces,
)
from tests.hardening.conftest import ROOT, files_under, run_cli


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A scratch copy of the shipped documents, as the working directory, plus odd paths."""
    previous = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="rdusim-fuzz-") as name:
        root = Path(name)
        shutil.copytree(ROOT / "mappings", root / "mappings")
        shutil.copytree(ROOT / "hw_configs", root / "hw_configs")
        shutil.copytree(ROOT / "rdusim" / "config" / "models", root / "models")
        (root / "adir").mkdir()
        (root / "afile").write_text("x")
        (root / "link").symlink_to(root / "afile")
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(previous)


SLO = ["--slo-ttft-s", "1000", "--slo-tpot-ms", "10000"]


def _follow_up(name: str, target: Path) -> list[str]:
    """A simulation that reads the mutated document (at a modest prompt length)."""
    kind = kind_of(ROOT / name) if not name.startswith("models/") else "model"
    if kind == "serving":  # small step-time tables: a copy's tables are built afresh (its own paths)
        return ["serve", str(target), "--rate", "1", "--requests", "20", *SLO, "--set", "decode.max_context=4096",
                "--set", "prefill.grid=[1024, 4096]", "--set", "decode.kv_grid=[1024, 4096]",
                "--prompt-tokens", "uniform:1024,4096", "--output-tokens", "uniform:1,16"]
    if kind == "gpu_mapping":
        return ["simulate", str(target), "--seq-len", "4096", "--format", "json"]
    if kind in ("gpu", "gpu_node"):
        return ["simulate", "mappings/llama-3.1-8b/decode-h100.yaml", "--seq-len", "4096", "--format", "json",
                "--hw", str(target)]
    if name.startswith("mappings/"):
        return ["simulate", str(target), "--seq-len", "4096", "--format", "json"]
    if name.startswith("models/"):
        return ["simulate", "mappings/llama-3.1-8b/decode.yaml", "--seq-len", "4096", "--format", "json",
                "--set", f"model={target}"]
    if name.endswith("sn40l.yaml"):
        return ["simulate", "mappings/llama-3.1-8b/decode.yaml", "--seq-len", "4096", "--format", "json"]
    return ["simulate", "mappings/llama-3.1-8b/decode.yaml", "--seq-len", "4096", "--format", "json",
            "--hw", str(target)]


@given(mutated_documents())
def test_mutated_documents_keep_the_contract(case: tuple[str, bytes, str]) -> None:
    name, data, edit = case
    with workspace() as root:
        target = root / name
        target.write_bytes(data)
        for argv in (["validate", str(target)], _follow_up(name, target)):
            before = files_under(root)
            result = run_cli(*argv)
            check_contract(result, before, files_under(root), f"{' '.join(argv)} after {edit}",
                           [str(target), *argv[1:2]], document=str(target))


@given(cli_argvs())
def test_command_lines_keep_the_contract(argv: list[str]) -> None:
    with workspace() as root:
        (root / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,1000,4\n0.5,2000,8\n")
        before = files_under(root)
        result = run_cli(*argv)
        check_contract(result, before, files_under(root), " ".join(map(repr, argv)),
                       [a for a in argv if not a.startswith("-")])


@given(traces())
def test_mutated_traces_keep_the_contract(case: tuple[bytes, str]) -> None:
    data, edit = case
    with workspace() as root:
        (root / "trace.csv").write_bytes(data)
        argv = ["serve", SERVE, "--trace", "trace.csv", *SLO]
        before = files_under(root)
        result = run_cli(*argv)
        check_contract(result, before, files_under(root), f"serve --trace after {edit}", ["trace.csv", "--trace"])


@given(valid_traces(), st.sampled_from(["utf-8", "utf-8-sig"]), st.sampled_from(NEWLINES))
def test_valid_traces_are_read_exactly(case: tuple[str, str, list], encoding: str, newline: str) -> None:
    """Every layout, in any order, with or without a byte-order mark, with any line ending:
    the requests of the file, in file order, arrivals relative to the first."""
    layout, text, requests = case
    with tempfile.TemporaryDirectory(prefix="rdusim-trace-") as name:
        path = Path(name) / ("trace.jsonl" if layout in ("mooncake", "plain-jsonl") else "trace.csv")
        path.write_bytes(text.replace("\n", newline).encode(encoding))
        workload = read_trace(path)
    arrivals = np.array([r[0] for r in requests])
    np.testing.assert_allclose(workload.arrival_s, arrivals - arrivals.min(), rtol=0, atol=1e-6)
    assert workload.prompt_tokens.tolist() == [r[1] for r in requests]
    assert workload.output_tokens.tolist() == [r[2] for r in requests]
    assert workload.skipped == 0
