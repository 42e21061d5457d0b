"""``rdusim fidelity --gpu``: the GPU model against its committed measurements (issue 17's acceptance).

The sets run here are the quick ones (P10's CSVs, the graph-decode steps, two collective runs):
the whole table takes about a minute (``rdusim fidelity --gpu``). Figures that other work moves
(GEMMs, eager, clock) are not pinned: only the acceptance, which a regression must fail."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from rdusim.analysis.gpu import fidelity as fid
from rdusim.analysis.gpu.collectives import CALLS_PER_ROW, collective_runs
from rdusim.cli import main

from .scripts import bench_script

ROOT = Path(__file__).resolve().parents[2]
GRAPH_RUNS = ("h100-20261125-sweep.csv", "h200-20261125k-sweep.csv", "h100-20261125o-sweep.csv")


@pytest.fixture(scope="module")
def frame():
    """The table on a subset of the sources: P10 and its held-out run, three graph-decode runs,
    the collectives of two runs (one with calibration rows), run ac's TP2 decode steps, run l's
    small kernels."""
    two = ("h100x2-20261125t-collectives.csv", "h100x2-20261125u-collectives.csv")
    assert set(two) <= {p.name for p in collective_runs(ROOT / fid.GPU_DIR)}
    sources = (
        fid.SOURCES[0],
        fid.SOURCES[1],
        *(fid._graph(name, name) for name in GRAPH_RUNS),
        fid.collectives_source(two),
        fid._tp_steps("h200x2-20261128ac-tp2new.csv"),
        fid._small("h100-20261125l-small.csv", "run l"),
    )
    original = fid.SOURCES
    fid.SOURCES = sources
    try:
        return fid.gpu_fidelity(ROOT)
    finally:
        fid.SOURCES = original


def test_structure_and_roles_counted_apart(frame) -> None:
    assert list(frame.columns[:7]) == [
        "set",
        "gpu",
        "kind",
        "role",
        "rows",
        "median_abs_error",
        "worst_error",
    ]
    assert set(frame["role"]) == {"calibration", "prediction"}
    keys = list(zip(frame["set"], frame["gpu"], frame["kind"], frame["role"], strict=True))
    assert len(keys) == len(set(keys))  # one row per set, GPU, kind and role
    p10 = frame[frame["set"].str.startswith("P10 (")]
    # P10's calibration rows (copies, three GEMMs, one SiLU row) are their own rows, never gated
    cal = p10[p10["role"] == "calibration"]
    assert set(cal["kind"]) >= {"copy", "GEMMs"} and (cal["within"] == "").all()
    assert int(p10["rows"].sum()) == sum(int(n) for n in p10["rows"])
    gemms = p10[p10["kind"] == "GEMMs"].set_index("role")["rows"]
    assert gemms["calibration"] == 3 and gemms["prediction"] == 38
    for row in frame.itertuples():
        assert row.rows > 0 and row.median_abs_error <= abs(row.worst_error) + 1e-12
    coll = frame[frame["kind"].str.startswith("collectives: ")]
    assert set(coll["gpu"]) == {"2 x H100"}
    assert set(frame[frame["kind"] == "TP2 decode (graph)"]["gpu"]) == {"2 x H200"}
    # run l: small kernels and decode GEMMs, each with its calibration rows apart, not gated
    small = frame[frame["set"].str.startswith("run l")]
    assert len(small) == 4 and set(small["role"]) == {"calibration", "prediction"}
    assert (small["within"] == "").all() and (small["acceptance"] == "").all()
    assert {k.split(", ")[1] for k in coll["kind"]} == {"stream", "graph"}
    assert (coll[coll["role"] == "calibration"]["kind"] == "collectives: all_reduce, stream").all()


def test_graph_decode_and_p10_within_the_acceptance(frame) -> None:
    """A regression of graph decode (issue 17's 4% / 8%) or of a P10 figure (no worse than P10's
    model) fails here; P10's eager rows are a known miss with its reason (the pooled host)."""
    graph = frame[(frame["kind"] == "graph decode") & (frame["role"] == "prediction")]
    assert len(graph) == len(GRAPH_RUNS) + 2  # P10's and its held-out run's too
    assert (graph["within"] == "yes").all(), graph[["set", "median_abs_error", "worst_error"]]
    tp = frame[frame["kind"] == "TP2 decode (graph)"]  # run ac, two H200s: the same standard
    assert (
        len(tp) == 1
        and tp["within"].iloc[0] == "yes"
        and tp["acceptance"].iloc[0] == "graph decode"
    )
    p10 = frame[frame["set"].str.startswith("P10") & (frame["acceptance"] != "")]
    for kind in ("attention", "GEMMs", "e2e prefill", "graph decode"):
        rows = p10[p10["kind"] == kind]
        assert not rows.empty and (rows["within"] == "yes").all(), rows
    eager = p10[p10["kind"] == "eager decode"]
    assert set(eager["within"]) <= {"yes", "known miss"}
    assert fid.regressions(frame).empty


def test_a_known_miss_carries_its_reason(frame) -> None:
    misses = frame[frame["within"] == "known miss"]
    assert not misses.empty
    for row in misses.itertuples():
        assert row.reason == fid.KNOWN_MISSES[row.acceptance] and "docs/gpu.md" in row.reason
    assert (frame[frame["within"] != "known miss"]["reason"] == "").all()
    # a set outside its tolerance with no reason is a regression, not a known miss
    outside = frame.iloc[[0]].assign(within="no")
    assert len(fid.regressions(outside)) == 1


def test_every_source_file_is_committed() -> None:
    """Every CSV a source reads exists (a renamed file must fail here, not in the command)."""
    import inspect

    for source in fid.SOURCES:
        names = [
            c
            for c in inspect.getclosurevars(source.groups).nonlocals.values()
            if isinstance(c, str) and c.endswith(".csv")
        ]
        for name in names:
            assert (ROOT / fid.GPU_DIR / name).is_file(), name


def test_issue17_quoted_figures_computed() -> None:
    quoted = fid.issue17_quoted(ROOT)
    assert [q.role for q in quoted] == ["predicted", "known miss", "known miss", "known miss"]
    assert quoted[0].within and quoted[0].model.endswith("us (4 KB)")
    for q in quoted[1:]:
        assert not q.within and "docs/gpu.md" in q.reason
    floor2 = float(quoted[0].model.split()[0])
    assert math.isclose(floor2, 7, rel_tol=0.25)


def test_bad_root_exits_2(tmp_path, capsys) -> None:
    assert main(["fidelity", "--gpu", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "benchmarks/gpu" in err and "Traceback" not in err


def test_collectives_script_calls_per_row_is_the_models() -> None:
    """collectives.py keeps its own ``PER`` (a measurement run imports torch only); the model's
    comparison assumes the same number of calls per row."""
    assert bench_script("collectives").PER == CALLS_PER_ROW


def test_out_csv(tmp_path, monkeypatch) -> None:
    """``--out`` writes the table as CSV (one source, to keep it short)."""
    monkeypatch.setattr(fid, "SOURCES", (fid._graph("h100-20261125o-sweep.csv", "run o"),))
    out = tmp_path / "gpu.csv"
    assert main(["fidelity", "--gpu", "--root", str(ROOT), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["kind"] for r in rows] == ["graph decode"] and rows[0]["within"] == "yes"
