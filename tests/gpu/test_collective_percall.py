"""collective_percall.py's analysis (CPU): the spread, the excess and the spread's slope."""

import csv
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"))
import collective_percall as pc  # noqa: E402

MIB = 1 << 20


def _write(path, times: dict[int, list[float]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=pc.FIELDS)
        w.writeheader()
        for mib, us in times.items():
            for i, u in enumerate(us):
                w.writerow({"variant": "v", "op": "all_reduce", "bytes": mib * MIB, "ranks": 2, "rank": 0,
                            "call": i, "us": u, "gap_us": 0, "gpu": "g", "nccl": "2.28.9", "env": ""})


def test_spread_excess_and_slope_of_a_square_root_law(tmp_path):
    # each size: the same five offsets scaled by sqrt(S): the spread grows as S^0.5 exactly
    offsets = [-2.0, -1.0, 0.0, 1.0, 2.0]
    times = {s: [3.0 * s + 10.0 * math.sqrt(s) + o * math.sqrt(s) for o in offsets] for s in (16, 64, 256, 512, 1024)}
    _write(tmp_path / "a.csv", times)
    (key, per), = pc.load([str(tmp_path / "a.csv")]).items()
    assert key == ("v", "all_reduce", 2)
    rows = pc.summarise(per)
    assert [r["mib"] for r in rows] == [16, 64, 256, 512, 1024]
    assert rows[0]["median"] == 3.0 * 16 + 40.0
    # IQR of the five offsets (quantiles, exclusive method) is 3.0 x sqrt(S)
    assert math.isclose(rows[2]["spread"], 3.0 * 16 / 1.349)
    # excess over the line through 512 and 1024 MiB's medians
    per_mib = (rows[4]["median"] - rows[3]["median"]) / 512
    assert math.isclose(rows[1]["excess"], rows[1]["median"] - 64 * per_mib)
    assert math.isclose(pc.spread_slope(rows), 0.5)


def test_slope_needs_two_sizes():
    assert math.isnan(pc.spread_slope([{"mib": 16, "spread": 1.0}]))


def test_load_reads_a_gzipped_run_as_the_plain_one(tmp_path):
    import gzip
    import shutil

    _write(tmp_path / "a.csv", {16: [1.0, 2.0, 3.0]})
    with open(tmp_path / "a.csv", "rb") as src, gzip.open(tmp_path / "a.csv.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert pc.load([str(tmp_path / "a.csv.gz")]) == pc.load([str(tmp_path / "a.csv")]) == {
        ("v", "all_reduce", 2): {16: [1.0, 2.0, 3.0]}
    }
