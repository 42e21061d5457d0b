"""benchmarks/gpu/collectives_parity.py on the committed collectives CSVs: it runs, draws one panel
per collective, and marks a row a frozen prediction only where the run's frozen table still holds
today's figure."""

from __future__ import annotations

from pathlib import Path

from .scripts import ROOT, bench_script


def _parity():
    return bench_script("collectives_parity")


def test_parity_figure_of_the_committed_runs(tmp_path: Path) -> None:
    parity = _parity()
    csvs = parity.default_csvs()
    names = {p.name for p in csvs}
    assert names >= {f"h100x2-20261125{r}-collectives.csv" for r in "tuv"}
    assert "h100x4-20261128w-x3-floors.csv" in names and "h100x4-20261128y-y4.csv" in names
    assert not any("nomix" in n or "percall" in n or "micro" in n for n in names)
    pts = parity.points(csvs)
    by_run: dict[str, set[str]] = {}
    for p in pts:
        by_run.setdefault(p["run"], set()).add(p["status"])
        assert p["predicted"] > 0 and p["measured"] > 0
    assert by_run["run t"] == {"calibration", "explained"}  # the run the model was built on
    assert by_run["run u"] == {"frozen", "explained"}  # its LL and all-to-all rows moved after it
    # run v: frozen at 4949ab7; its ring LL rows unchanged since (the ring LL latency fit of P12 was
    # reverted), its ring Simple rows moved when the ring's channels were simulated, its all-to-all's
    # p2p Simple rows when the p2p channels were (runs ch, ci, dj) and its p2p LL rows when they ran
    # on NCCL's LL channels (runs dk, dl): explained
    assert by_run["run v"] == {"frozen", "explained"}
    moved = [p for p in pts if p["run"] == "run v" and p["status"] == "explained"]
    assert moved and {p["algorithm"] for p in moved} == {"ring/Simple", "p2p/Simple", "p2p/LL"}
    # still frozen: the ring's LL rows and the p2p LL rows on 16 channels a peer (the LL rate binds there)
    assert {p["algorithm"] for p in pts if p["run"] == "run v" and p["status"] == "frozen"} == {"ring/LL", "p2p/LL"}
    # run w: its calibration rows (set column) and every predicted file are read
    assert by_run["run w"] == {"calibration", "frozen", "explained"}
    frozen_w = [p for p in pts if p["run"] == "run w" and p["status"] == "frozen"]
    assert {p["ranks"] for p in frozen_w} == {2, 3, 4} and {p["mode"] for p in frozen_w} == {
        "graph",
        "stream",
        "queued",
    }
    # run x was frozen for the H200 (h200.yaml) and ran on H100s; the model changed since: explained
    assert by_run["run x"] == {"calibration", "explained"}
    frozen_x = parity.frozen_files(
        ROOT / "benchmarks/gpu/h100x2-20261128x-collectives.csv", any_device=True
    )
    assert [p.name for p in frozen_x] == ["h200x2-20261128x-collectives-predicted.txt"]
    assert not parity.model_unchanged_since(
        frozen_x[0], "hw_configs/h100.yaml"
    )  # rdusim/ changed since 0b80079
    out = tmp_path / "parity.png"
    titles = parity.plot(pts, out)
    assert [t.splitlines()[0] for t in titles] == [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
    ]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_frozen_table_is_read_by_row_and_gpu_count(tmp_path: Path) -> None:
    parity = _parity()
    csv_path = tmp_path / "h100x4-20261128w-collectives.csv"
    (tmp_path / "h100x4-20261128w-collectives-predicted.txt").write_text(
        "# frozen\n| row | ranks | predicted (us) | algorithm/protocol |\n|---|---:|---:|---|\n"
        "| all_reduce_1024_graph | 2 | 9.65 | ring/LL |\n| all_reduce_1024_graph | 4 | 12.10 | ring/LL |\n\n"
        "| TP2 row (Llama-3.1-8B) | predicted step (us) | of which all-reduce (us) |\n|---|---:|---:|\n"
        "| tp2_decode_b1_l1024_graph | 5537.0 | 620.5 |\n"
    )
    assert parity.frozen_predictions(csv_path) == {
        ("all_reduce_1024_graph", 2): {9.65},
        ("all_reduce_1024_graph", 4): {12.10},
    }
    # one parser (collectives.frozen_rows): collectives.py --against reads the same table, its TP
    # step too (no section line: GPU count None)
    frozen = bench_script("collectives").read_frozen(
        tmp_path / "h100x4-20261128w-collectives-predicted.txt"
    )
    assert frozen == {
        ("all_reduce_1024_graph", 2): (9.65, "ring/LL"),
        ("all_reduce_1024_graph", 4): (12.10, "ring/LL"),
        ("tp2_decode_b1_l1024_graph", None): (5537.0, ""),
    }
    assert parity.run_label(csv_path) == "run w"
    # a second frozen file of the same run, its GPU count given by its section line
    (tmp_path / "h100x4-20261128w-floors-predicted.txt").write_text(
        "# frozen predictions: hw_configs/h100.yaml, bus 343.1 GB/s, 3 GPUs, NVLS off\n"
        "| row | predicted (us) | algorithm/protocol |\n|---|---:|---|\n| all_reduce_1024_graph | 11.00 | ring/LL |\n"
        "# frozen predictions: hw_configs/h100.yaml, bus 343.1 GB/s, 4 GPUs, NVLS off\n"
        "| row | predicted (us) | algorithm/protocol |\n|---|---:|---|\n| all_reduce_1024_graph | 12.20 | ring/LL |\n"
    )
    other = tmp_path / "h100x4-20261128w-x3-floors.csv"
    assert parity.run_label(other) == "run w"
    assert parity.frozen_predictions(other) == {
        ("all_reduce_1024_graph", 2): {9.65},
        ("all_reduce_1024_graph", 3): {11.00},
        ("all_reduce_1024_graph", 4): {12.10, 12.20},
    }


def test_a_run_with_several_gpu_counts_on_the_h200(tmp_path: Path) -> None:
    """A CSV of 2 and 4 ranks on an H200 (no frozen table): h200.yaml predicts it, each GPU count
    is its own series, and no row is called a frozen prediction."""
    parity = _parity()
    csv_path = tmp_path / "h200x4-20261128x-collectives.csv"
    head = "set,kind,name,median_us,reps,op,bytes,ranks,mode,nccl,gpu\n"
    rows = [
        f"prediction,collective,{op}_{size}_{mode},{us},200,{op},{size},{n},{mode},2.28.9,NVIDIA H200"
        for op, size, n, mode, us in (
            ("all_reduce", 1024, 2, "graph", 10.0),
            ("all_reduce", 1024, 4, "graph", 14.0),
            ("all_to_all", 1 << 24, 4, "stream", 80.0),
        )
    ]
    csv_path.write_text(head + "\n".join(rows) + "\n")
    pts = parity.points([csv_path])
    assert {(p["run"], p["gpu"], p["ranks"]) for p in pts} == {
        ("run x", "H200", 2),
        ("run x", "H200", 4),
    }
    assert {p["status"] for p in pts} == {"explained"}
    two, four = (p["predicted"] for p in pts[:2])
    assert four > two  # the ring's latency grows with the GPU count
    assert len(parity.plot(pts, tmp_path / "x.png")) == 4
