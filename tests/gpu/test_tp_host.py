"""benchmarks/gpu/tp_host.py (run cl): the site table a layer and the registered checks, from
synthetic trial rows."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from .scripts import bench_script


def _write(path: Path, variant: str, gpu: float, host: float, ar: float, trials: int = 3) -> Path:
    th = bench_script("tp_host")
    with path.open("w", newline="") as fh:
        out = csv.DictWriter(fh, fieldnames=th.FIELDS)
        out.writeheader()
        for trial in range(trials):
            sites = dict.fromkeys(th.SITES, 10.0 * 32)
            sites["all_reduce1"] = sites["all_reduce2"] = ar * 32
            out.writerow({"variant": variant, "ranks": 2, "layers": 32, "seq_len": 1024, "trial": trial,
                          "gpu_us": gpu * 32 + trial, "host_us": host * 32, **sites, "embedding": 20.0, "head": 50.0})
    return path


def test_the_table_and_the_checks_read_medians_a_layer(tmp_path: Path) -> None:
    """Medians over trials divided by the layers; P, A, R, G, M as registered."""
    th = bench_script("tp_host")
    files = [_write(tmp_path / "tp.csv", "tp", 1150.0, 1100.0, 200.0),
             _write(tmp_path / "noar.csv", "noar", 800.0, 780.0, 0.0),
             _write(tmp_path / "single.csv", "single", 560.0, 500.0, 0.0)]
    table = th.analyse(files)
    assert "| tp | 2 | 1024 | 3 | 36.80 | 35.20 | 1150 | 1100 | 10.0 |" in table[4]   # rows by length, then variant
    checks = th.verdict(files)
    assert checks[0].endswith("1150 us -> pass")
    assert checks[1] == "A (the all-reduce calls: their host a layer >= 300 us, the document's 2 x 44.9): 400 us -> pass"
    assert checks[2].endswith("780 against 500 us (1.56) -> pass")
    assert checks[3].endswith("1150 against 1100 us (1.05) -> fail")
    assert checks[4].endswith("500 us -> pass")


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    th = bench_script("tp_host")
    assert th.main(["--analyse", str(tmp_path / "none.csv")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize(("run", "flag", "verdict"), [
    ("cl", "verdict", "G (the GPUs set the pace: tp's GPU time a layer >= 1.3 x its host's): 1114 against 1112 us (1.00) -> fail"),
    ("cm", "verdict_cm", "S (TP2: host a layer, GPU waiting over GPU behind, >= 1.3): 1.35 -> pass"),
    ("cn", "verdict_cm", "S (TP2: host a layer, GPU waiting over GPU behind, >= 1.3): 1.00 -> fail"),
])
def test_runs_cl_cm_cns_committed_analyses_are_what_their_csvs_give(run: str, flag: str, verdict: str) -> None:
    """docs/gpu.md's table of runs cl-cn is read from these files: the committed analysis is what
    ``--analyse`` (and the run's registered checks) print from the committed CSVs now."""
    th = bench_script("tp_host")
    gpu = Path(__file__).resolve().parents[2] / "benchmarks/gpu"
    files = sorted(gpu.glob(f"h200x2-20261130{run}-*.csv"))
    checks = th.verdict(files) if flag == "verdict" else th.verdict_cm(files)
    assert "\n".join([*th.analyse(files), "", *checks]) + "\n" == (gpu / f"h200x2-20261130{run}-analysis.txt").read_text()
    assert verdict in checks
