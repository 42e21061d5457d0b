"""``rdusim fidelity --gpu --plot``: the figure of the GPU model's errors, on synthetic groups
(the whole table takes about a minute: ``rdusim fidelity --gpu --plot``)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.image
import pytest

from rdusim.analysis.gpu import fidelity as fid
from rdusim.analysis.gpu.fidelity_plot import _summary, fidelity_items, item_of, plot_fidelity
from rdusim.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _group(set_: str, gpu: str, kind: str, role: str, errors: tuple[float, ...], acceptance: str | None) -> fid.Group:
    return fid.Group(f"{set_} (x.csv)", f"{set_}.csv", gpu, kind, role, errors, acceptance)


#: a few groups shaped like the table's: P10's, GEMMs on both GPUs (a calibration group apart),
#: collectives of two ops and launch modes, a TP step, an ungated kind, a calibration-only kind
GROUPS = (
    _group("P10", "H100", "GEMMs", "calibration", (0.01, -0.02), None),
    _group("P10", "H100", "GEMMs", "prediction", (0.03, -0.05, 0.9), "P10 GEMMs"),
    _group("P10", "H100", "copy", "calibration", (0.001,), None),
    _group("P10", "H100", "launch", "prediction", (-0.2, -0.3), None),
    _group("run a", "H100", "GEMMs", "prediction", (0.02, -0.04, 0.06), "GEMMs"),
    _group("run a", "H100", "GEMMs", "calibration", (0.01,), None),
    _group("run k", "H200", "GEMMs", "prediction", (0.05, -0.5, 2.5), "GEMMs"),
    _group("run t", "2 x H100", "collectives: all_reduce, stream", "calibration", (0.1,), None),
    _group("run t", "2 x H100", "collectives: all_reduce, stream", "prediction", (0.1, -0.2), "collectives"),
    _group("run t", "2 x H100", "collectives: all_reduce, graph", "prediction", (0.05,), "collectives"),
    _group("run t", "2 x H100", "collectives: all_gather, graph", "prediction", (0.3, 0.4), "collectives"),
    _group("run ac", "2 x H200", "TP2 prefill", "prediction", (-0.11, -0.3), "TP prefill"),
    _group("run l", "H100", "small kernels (profiled)", "prediction", (0.5, -0.1), None),
)
ITEMS = [
    "GEMMs",
    "collectives: all_reduce",
    "collectives: all_gather",
    "TP2 prefill",
    "P10 GEMMs",
    "P10 copy (calibration only)",
    "P10 launch (not gated)",
    "small kernels (profiled) (not gated)",
]


def test_one_row_per_item_of_the_table() -> None:
    frame = fid.fidelity_table(list(GROUPS), ROOT)
    items = fidelity_items(GROUPS, frame)
    assert [item.name for item in items] == ITEMS
    # every prediction group of the table is on exactly one row, with all its errors
    pred = [g for g in GROUPS if g.role == "prediction"]
    assert {item_of(g) for g in pred} | {"P10 copy (calibration only)"} == set(ITEMS)
    by_name = {item.name: item for item in items}
    gemms = by_name["GEMMs"]
    assert gemms.prediction == {"H100": [0.02, -0.04, 0.06], "H200": [0.05, -0.5, 2.5]}
    assert gemms.calibration == {"H100": [0.01]}  # run a's calibration rows, apart
    assert gemms.tolerance == (fid.ACCEPTANCE["GEMMs"].median, fid.ACCEPTANCE["GEMMs"].worst)
    assert gemms.verdicts == ["yes", "no"]  # the table's verdicts (run k: a regression here)
    assert by_name["collectives: all_reduce"].calibration == {"H100": [0.1]}
    assert len(by_name["collectives: all_reduce"].verdicts) == 2  # both launch modes
    assert by_name["P10 launch (not gated)"].tolerance is None
    assert by_name["P10 copy (calibration only)"].prediction == {}
    # the text right of each row counts the table's groups (not sets: run a and run k are two)
    assert _summary(gemms) == "6 rows (+1 cal.); 2 groups: 1 yes, 1 no"
    assert _summary(by_name["TP2 prefill"]) == "2 rows; 1 group: 1 no"  # x.csv: no record
    assert _summary(by_name["P10 launch (not gated)"]) == "2 rows, not gated"

    backend = matplotlib.get_backend()
    ax = plot_fidelity(items)
    assert matplotlib.get_backend() == backend  # no global state touched
    assert [t.get_text() for t in ax.get_yticklabels()] == ITEMS  # one labelled row per item
    labels = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    assert labels[ITEMS[0]] > labels[ITEMS[-1]]  # the first item at the top
    assert ax.get_xscale() == "symlog"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "past the axis's end" in legend  # run k's +250% row, drawn at the axis's end
    assert "other GPU" not in legend


def test_another_gpu_is_drawn_not_dropped() -> None:
    """A GPU with no colour of its own (a B200 run, say) gets a line of its row, not a KeyError."""
    groups = (*GROUPS[:2], _group("run b", "B200", "GEMMs", "prediction", (0.01, 0.02), "GEMMs"))
    items = fidelity_items(groups, fid.fidelity_table(list(groups), ROOT))
    assert items[0].name == "GEMMs" and items[0].prediction == {"B200": [0.01, 0.02]}
    ax = plot_fidelity(items)
    assert "other GPU" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "past the axis's end" not in [t.get_text() for t in ax.get_legend().get_texts()]


def test_groups_and_table_must_match() -> None:
    with pytest.raises(ValueError, match="groups but"):
        fidelity_items(GROUPS, fid.fidelity_table(list(GROUPS[:3]), ROOT))


@pytest.fixture
def synthetic(monkeypatch):
    """The command's sources replaced by one returning ``GROUPS``."""
    source = fid.Source("synthetic", lambda root: list(GROUPS), ("x.csv",))
    monkeypatch.setattr(fid, "SOURCES", (source,))


def test_plot_written_with_the_table(tmp_path, synthetic, capsys) -> None:
    png, csv = tmp_path / "fid.png", tmp_path / "fid.csv"
    assert main(["fidelity", "--gpu", "--root", str(ROOT), "--plot", str(png), "--out", str(csv)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and csv.is_file()
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 400 and image.shape[1] > 1000
    assert "| run k (x.csv) | H200 | GEMMs | prediction | 3 |" in capsys.readouterr().out


def test_bad_plot_path_exits_2_writing_nothing(tmp_path, synthetic, capsys) -> None:
    csv = tmp_path / "fid.csv"
    bad = tmp_path / "no-such-folder" / "fid.png"
    assert main(["fidelity", "--gpu", "--root", str(ROOT), "--out", str(csv), "--plot", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "does not exist" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # checked before the work: no CSV either


def test_plot_only_with_gpu(tmp_path, capsys) -> None:
    assert main(["fidelity", "--plot", str(tmp_path / "fid.png")]) == 2
    assert "only with --gpu" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
