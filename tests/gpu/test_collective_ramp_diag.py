"""benchmarks/gpu/collective_ramp_diag.py: CLI validation, the plan, the device path on a fake
torch (every call it makes, no GPU) and the analysis on a synthetic CSV."""

from __future__ import annotations

import csv
import math
import sys
import types
from pathlib import Path

import pytest

from .scripts import bench_script

MIB = 1 << 20


@pytest.fixture(scope="module")
def diag() -> types.ModuleType:
    return bench_script("collective_ramp_diag")


def test_bad_flags_exit_2(diag: types.ModuleType) -> None:
    for argv in (
        ["--dry-run", "--cases", "foo"],
        ["--dry-run", "--ops", "all_sum"],
        ["--dry-run", "--sizes", "1,x"],
        ["--dry-run", "--sizes", "0"],
        ["--cases", "plain"],
        ["--dry-run", "--ops", "sendrecv", "--ranks", "4"],
    ):
        with pytest.raises(SystemExit) as err:
            diag.main(argv)
        assert err.value.code == 2


def test_plan_rotation_and_caps(diag: types.ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        diag.main(["--dry-run", "--ops", "all_reduce", "--cases", "plain,rot", "--case-max", "256"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 12 + 8  # plain at every default size, rot up to 256 MiB
    # the other buffer sets of a call hold at least four L2s, and never more sets than calls a graph
    for size in (2, 16, 64, 256):
        k = diag.rotations("all_reduce", size * MIB, 2, 20)
        assert 2 <= k <= 20 and (k - 1) * size * MIB >= diag.ROTATE_BYTES or k == 20
    assert diag.per_calls(1024 * MIB, 20, 300.0) == 6
    assert diag.per_calls(2 * MIB, 20, 300.0) == 20


class _Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _fake_torch(log: list[str]) -> tuple[types.ModuleType, types.ModuleType]:
    """A torch and torch.distributed with the calls the device path makes, each logged."""
    torch = types.ModuleType("torch")
    cuda = types.SimpleNamespace()
    dist = types.ModuleType("torch.distributed")

    class Tensor:
        def __init__(self, n: int) -> None:
            self.n = n

        def fill_(self, v: float) -> Tensor:
            log.append("flush")
            return self

        def narrow(self, dim: int, start: int, length: int) -> Tensor:
            view = Tensor(length)
            view.base, view.start = self, start
            return view

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing

        def record(self) -> None:
            pass

        def elapsed_time(self, other: Event) -> float:
            return 2.0  # ms

    class Graph:
        def replay(self) -> None:
            log.append("replay")

    class Stream:
        def wait_stream(self, other: object) -> None:
            pass

    cuda.set_device = lambda i: None
    cuda.get_device_name = lambda: "Fake H100"
    cuda.nccl = types.SimpleNamespace(version=lambda: (2, 28, 9))
    cuda.Stream, cuda.current_stream, cuda.stream = Stream, Stream, lambda s: _Ctx()
    cuda.synchronize = cuda.empty_cache = lambda: None
    cuda.CUDAGraph, cuda.graph, cuda.Event = Graph, lambda g: _Ctx(), Event
    cuda._sleep = lambda cycles: log.append(f"sleep {cycles}")
    torch.cuda = cuda
    torch.device = lambda name: name
    torch.bfloat16 = torch.float32 = "dtype"
    torch.empty = torch.randn = lambda n, dtype, device: Tensor(n)
    torch.empty_like = lambda t: Tensor(t.n)
    dist.init_process_group = lambda backend: None
    dist.get_world_size = lambda: 2
    dist.barrier = lambda: None
    dist.all_reduce = lambda buf: log.append("all_reduce")
    dist.all_gather_into_tensor = lambda whole, part: log.append(
        f"all_gather in place at {part.start} of {whole.n}" if getattr(part, "base", None) is whole
        else "all_gather")
    dist.reduce_scatter_tensor = lambda part, whole: log.append("reduce_scatter")
    dist.all_to_all_single = lambda recv, send: log.append("all_to_all")
    dist.get_rank = lambda: 0
    dist.isend, dist.irecv = "isend", "irecv"
    dist.P2POp = lambda op, tensor, peer: (op, peer)

    class Work:
        def wait(self) -> None:
            pass

    def batch(ops: list) -> list:
        log.append("p2p " + " ".join(f"{op}:{peer}" for op, peer in ops))
        return [Work() for _ in ops]

    dist.batch_isend_irecv = batch
    torch.distributed = dist
    return torch, dist


def _install_fake_torch(diag: types.ModuleType, monkeypatch: pytest.MonkeyPatch, log: list[str]) -> types.ModuleType:
    """``_fake_torch`` in place of torch for the test, and the script's ``os._exit`` a SystemExit;
    returns the fake torch.distributed."""
    torch, dist = _fake_torch(log)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)

    def fake_exit(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(diag.os, "_exit", fake_exit)
    return dist


def test_device_path_on_a_fake_torch(
    diag: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    _install_fake_torch(diag, monkeypatch, log)
    monkeypatch.setenv("NCCL_MIN_NCHANNELS", "1")
    out = tmp_path / "d.csv"
    with pytest.raises(SystemExit):
        diag.main(
            [
                "--out",
                str(out),
                "--variant",
                "ch1",
                "--sizes",
                "2,64",
                "--cases",
                "plain,rot,gap10",
                "--per",
                "4",
                "--reps",
                "3",
            ]
        )
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4 * 3 * 2
    assert {r["env"] for r in rows} == {"NCCL_MIN_NCHANNELS=1"}
    assert all(float(r["median_us"]) == 500.0 for r in rows)  # 2 ms / 4 calls
    assert {r["sleep_us"] for r in rows if r["case"] == "gap10"} == {"500.0"}
    assert log.count("flush") == 4 * 2 * 3  # before every rot trial
    assert "sleep 20000" in log and {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
    } <= set(log)


def test_analysis_finds_a_synthetic_ramp(
    diag: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """t = 25 + 3 us/MiB x S + a ramp of 0.4 us/MiB that stops at 400 MiB: the fit from 512 MiB
    gives 3 us/MiB, the ramp slope 0.4, the excess flat 185 us above 400 MiB."""
    path = tmp_path / "r.csv"
    sizes = [2, 16, 64, 256, 512, 768, 1024]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=diag.FIELDS)
        w.writeheader()
        for s in sizes:
            t = 25 + 3 * s + 0.4 * min(s, 400)
            w.writerow(
                {
                    "variant": "ch24",
                    "case": "plain",
                    "op": "all_reduce",
                    "bytes": s * MIB,
                    "median_us": t,
                    "sleep_us": 0,
                }
            )
            w.writerow(
                {
                    "variant": "ch24",
                    "case": "gap10",
                    "op": "all_reduce",
                    "bytes": s * MIB,
                    "median_us": t + 10 + 1,
                    "sleep_us": 10,
                }
            )
    data = diag.load([str(path)])
    pts = data[("ch24", "plain", "all_reduce")]
    per_mib, used = diag.fit_per_mib(pts, 512)
    assert used == [512, 768, 1024] and math.isclose(per_mib, 3.0)
    exc = diag.excess(pts, per_mib)
    assert math.isclose(diag.ramp_slope(exc), 0.4) and math.isclose(exc[1024], 185.0)
    assert diag.main(["--analyse", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "ramp slope 0.400" in out and "ch24 all_reduce gap10 - plain (us, sleep off): 2:+1.0" in out
    )


def test_run_ad_figures(diag: types.ModuleType) -> None:
    """The figures docs/gpu.md quotes from run ad (the committed CSVs): the all-reduce's relative
    ramp over 16-256 MiB by ring channels (none at 1-8, half at 12, all at 24), its rate a channel,
    and rotated buffers past the L2 moving only the 2-8 MiB rows."""
    root = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"
    data = diag.load(sorted(str(p) for p in root.glob("h100x2-20261128ad-*.csv")))
    rel, gbps = {}, {}
    for ch in (1, 2, 4, 8, 12, 24):
        pts = data[(f"ch{ch}", "plain", "all_reduce")]
        per_mib, _ = diag.fit_per_mib(pts, 512)
        rel[ch] = round(diag.relative_ramp(pts, per_mib, 16, 256), 3)
        gbps[ch] = round(MIB / per_mib / 1e3, 1)
    assert rel == {1: 0.003, 2: 0.003, 4: -0.004, 8: -0.007, 12: 0.046, 24: 0.132}
    assert gbps == {1: 21.0, 2: 42.1, 4: 82.6, 8: 159.8, 12: 232.9, 24: 349.3}
    for op in diag.OPS:
        plain, rot = data[("ch24", "plain", op)], data[("ch24", "rot", op)]
        assert all(1.5 < rot[s] - plain[s] < 6 for s in (2, 4, 8))
        assert all(abs(rot[s] - plain[s]) < 6.5 for s in (16, 32, 64, 128, 256))
        for gap in ("gap10", "gap1000"):
            assert all(abs(data[("ch24", gap, op)][s] - plain[s]) < 8 for s in plain if s <= 256)


def test_p2p_ops_eager_on_a_fake_torch(
    diag: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sendrecv`` sends to and receives from the other rank; ``send_oneway`` on rank 0 (whose
    time is the row's) only receives from rank 1; the ``eager`` case times the calls without a
    graph (no replay)."""
    log: list[str] = []
    _install_fake_torch(diag, monkeypatch, log)
    out = tmp_path / "p.csv"
    with pytest.raises(SystemExit):
        diag.main(["--out", str(out), "--ops", "sendrecv,send_oneway", "--cases", "eager",
                   "--sizes", "64", "--per", "4", "--reps", "3"])
    rows = list(csv.DictReader(out.open()))
    assert [(r["op"], r["case"], r["median_us"]) for r in rows] == [
        ("sendrecv", "eager", "500.0"), ("send_oneway", "eager", "500.0")]
    assert "replay" not in log
    assert "p2p isend:1 irecv:1" in log and "p2p irecv:1" in log


def test_all_gather_inplace_on_a_fake_torch(
    diag: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``all_gather_inplace`` gathers into the output with the rank's own part of it as the input
    (NCCL's in-place all-gather); it is never in the default ops, and its footprint is the output."""
    log: list[str] = []
    dist = _install_fake_torch(diag, monkeypatch, log)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    out = tmp_path / "ip.csv"
    with pytest.raises(SystemExit):
        diag.main(["--out", str(out), "--ops", "all_gather_inplace,all_gather", "--sizes", "4",
                   "--per", "2", "--reps", "3"])
    rows = list(csv.DictReader(out.open()))
    assert [r["op"] for r in rows] == ["all_gather_inplace", "all_gather"]
    elems = 4 * MIB // 2  # bf16 elements of a 4 MiB output
    assert f"all_gather in place at {elems // 2} of {elems}" in log and "all_gather" in log
    assert "all_gather_inplace" not in diag.OPS
    assert diag.footprint("all_gather_inplace", 4 * MIB, 2) == 4 * MIB
