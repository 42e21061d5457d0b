"""benchmarks/gpu/ring_bends.py (run cr): the bends and the registered verdicts on synthetic files."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

from .scripts import bench_script

MIB = 1 << 20
SIZES = (16, 32, 64, 128, 256, 512, 1024)


def _rows(path: Path, variant: str, bend: dict[str, float]) -> None:
    """Each op a line (10 us + 2 us a MiB) with ``bend[op]`` us added at 256 MiB."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["variant", "case", "op", "bytes", "median_us", "sleep_us"])
        w.writeheader()
        for op, extra in bend.items():
            for mib in SIZES:
                w.writerow({"variant": variant, "case": "plain", "op": op, "bytes": mib * MIB,
                            "median_us": 10 + 2 * mib + (extra if mib == 256 else 0), "sleep_us": 0})


def _stamps(path: Path, local_ns: dict[str, int]) -> None:
    """Two channels in step at 24 and 16 channels, 256 MiB: the longer an op's local slices, the
    larger its all-local share."""
    with gzip.open(path, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["variant", "channels", "mib", "channel", "slice", "t_ns", "sm", "cluster"])
        for op, local in local_ns.items():
            label, per_loop = ("cl4", 6) if op == "all_reduce" else (f"cl4-{op}", 4)
            for channels in (24, 16):
                for ch in range(2):
                    t = 0
                    for s in range(3 * per_loop):
                        t += local if s % per_loop >= per_loop - 2 else 10
                        w.writerow([label, channels, 256, ch, s, t, 0, 0])


def test_verdicts_on_synthetic_files(tmp_path: Path) -> None:
    bends = bench_script("ring_bends")
    nccl = {"all_reduce": 38.0, "reduce_scatter": 50.0, "all_gather": 26.0}
    _rows(tmp_path / "def.csv", "def", nccl)
    _rows(tmp_path / "ch16.csv", "ch16", {"all_reduce": 22.0, "reduce_scatter": 51.0, "all_gather": 10.0})
    emul = tmp_path / "emul.csv"
    with open(emul, "w") as out:  # the emulation: the reduce-scatter deepest, all within 40% at 24
        _rows(tmp_path / "e24.csv", "cl4-ch24", {"all_reduce": 30.0, "reduce_scatter": 60.0, "all_gather": 20.0})
        _rows(tmp_path / "e16.csv", "cl4-ch16", {"all_reduce": 20.0, "reduce_scatter": 40.0, "all_gather": 5.0})
        lines = (tmp_path / "e24.csv").read_text().splitlines() + (tmp_path / "e16.csv").read_text().splitlines()[1:]
        out.write("\n".join(lines) + "\n")
    _stamps(tmp_path / "st.csv.gz", {"all_reduce": 20, "reduce_scatter": 40, "all_gather": 15})
    got = bends.verdict(str(emul), str(tmp_path / "def.csv"), str(tmp_path / "ch16.csv"), str(tmp_path / "st.csv.gz"))
    rs24 = next(x for x in got if x.startswith("| reduce_scatter | 24 |"))
    assert rs24.startswith("| reduce_scatter | 24 | +50 | +60 |")
    assert got[-3:] == ["R, run cq's bends hold on this lease: pass", "E, NCCL's protocol alone bends as NCCL does: pass",
                        "S, a deeper bend is a longer time in step (deepest emulated: reduce_scatter): pass"]
    # the all-gather's emulated bend 8 us under 40% of NCCL's: E fails; S still reads the stamps
    _rows(tmp_path / "e24.csv", "cl4-ch24", {"all_reduce": 30.0, "reduce_scatter": 60.0, "all_gather": 2.0})
    emul.write_text("\n".join((tmp_path / "e24.csv").read_text().splitlines()
                              + (tmp_path / "e16.csv").read_text().splitlines()[1:]) + "\n")
    got = bends.verdict(str(emul), str(tmp_path / "def.csv"), str(tmp_path / "ch16.csv"), str(tmp_path / "st.csv.gz"))
    assert got[-2] == "E, NCCL's protocol alone bends as NCCL does: fail"


def test_run_cr_as_committed() -> None:
    """Run cr's verdict and analysis are what ring_bends.py prints from its files: NCCL's 24-channel
    bends hold run cq's (R), the emulation's all-gather bends half as deep as NCCL's (E fails), the
    reduce-scatter's bend is the deepest and its channels the longest in step (S); and the engine's
    channels are in step as long as the emulation's at 24 channels and 256 MiB (within 0.02)."""
    bends = bench_script("ring_bends")
    gpu = Path(__file__).resolve().parents[2] / "benchmarks/gpu"
    p = str(gpu / "h200x2-20261130cr")
    got = bends.verdict(f"{p}-emul.csv", f"{p}-def.csv", f"{p}-ch16.csv", f"{p}-emul-stamps.csv.gz")
    assert "\n".join(got) + "\n" == (gpu / "h200x2-20261130cr-verdict.txt").read_text()
    assert [line.rsplit(": ", 1)[1] for line in got[-3:]] == ["pass", "fail", "pass"]
    got = bends.analyse(f"{p}-emul.csv", f"{p}-def.csv", f"{p}-emul-stamps.csv.gz")
    assert "\n".join(got) + "\n" == (gpu / "h200x2-20261130cr-analysis.txt").read_text()
    emul = bends.shares(f"{p}-emul-stamps.csv.gz")
    engine = bends.engine_shares(channels=(24,))
    assert all(abs(emul[op, 24, 256] - engine[op, 24]) <= 0.02 for op in bends.OPS)


def test_large_rates_read_two_gpu_graph_rows(tmp_path: Path) -> None:
    """--rates: the slope from 256 MB to the largest two-GPU graph row, in wire bytes (the all-reduce's
    S, the others' S / 2) and in the count's loads and stores (4 and 5 a wire byte); the committed
    table is what it prints for the seven two-GPU sweeps."""
    bends = bench_script("ring_bends")
    path = tmp_path / "c.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["op", "mode", "ranks", "bytes", "median_us"])
        for b, us in ((256 << 20, 1000.0), (1 << 30, 3000.0)):
            w.writerow(["all_reduce", "graph", 2, b, us])
            w.writerow(["reduce_scatter", "graph", 2, b, us / 2])
            w.writerow(["all_reduce", "stream", 2, b, 1.0])  # not graph: not read
            w.writerow(["all_gather", "graph", 4, b, 1.0])  # four GPUs: not read
    got = bends.large_rates(str(path))
    wire = (768 << 20) / 2000e-6 / 1e9
    assert got == {"all_reduce": (wire, 4 * wire), "reduce_scatter": (wire, 5 * wire)}
    gpu = Path(__file__).resolve().parents[2] / "benchmarks/gpu"
    committed = (gpu / "h200x2-20261130cr-rates.txt").read_text()
    names = [line.split(" | ")[0].removeprefix("| ") for line in committed.splitlines()[3:]]
    assert "\n".join(bends.rates_report([str(gpu / n) for n in names])) + "\n" == committed
    for op in bends.OPS:  # every sweep, every op: 1.3-1.45 TB/s of the count's loads and stores
        assert all(1300 <= bends.large_rates(str(gpu / n))[op][1] <= 1450 for n in names)
