"""benchmarks/gpu/ring_emul.py (run cc): CLI validation, the plan, a call's slices, and the stamp
arithmetic (loops' spread, the share of time every channel is in its local step) on synthetic
stamps, with the ramp table on a synthetic CSV."""

from __future__ import annotations

import csv
import types
from pathlib import Path

import pytest

from .scripts import bench_script

MIB = 1 << 20


@pytest.fixture(scope="module")
def ring() -> types.ModuleType:
    return bench_script("ring_emul")


def test_bad_flags_exit_2(ring: types.ModuleType) -> None:
    for argv in (
        ["--dry-run", "--variants", "fast"],
        ["--dry-run", "--channels", "1,x"],
        ["--dry-run", "--channels", "0"],
        ["--dry-run", "--channels", "65"],
        ["--dry-run", "--sizes", "-2"],
        ["--dry-run", "--variants", "cl4", "--channels", "6"],  # clusters of 4
        ["--variants", "nccl"],  # no --out
    ):
        with pytest.raises(SystemExit) as err:
            ring.main(argv)
        assert err.value.code == 2


def test_plan_names_and_caps(ring: types.ModuleType) -> None:
    rows = ring.plan(ring.DEFAULT_VARIANTS, (4, 24), (2, 2048), 20, 5)
    assert [r["variant"] for r in rows] == ["nccl-ch4"] * 2 + ["nccl-ch24"] * 2 + ["norecv-ch4"] * 2 + ["norecv-ch24"] * 2
    assert all(r["norecv"] == (r["kind"] == "norecv") for r in rows)
    # 2 GiB at 4 channels x 20 GB/s is 107 ms: one call a trial (TRIAL_MS 25), three trials
    big4 = next(r for r in rows if r["variant"] == "nccl-ch4" and r["bytes"] == 2048 * MIB)
    assert (big4["per"], big4["reps"]) == (1, 3)
    small = next(r for r in rows if r["variant"] == "nccl-ch24" and r["bytes"] == 2 * MIB)
    assert (small["per"], small["reps"]) == (20, 5)


def test_slices_per_call(ring: types.ModuleType) -> None:
    # a loop is channels x 2 ranks x 2 MiB: 96 MiB at 24 channels; six slices a loop
    assert ring.slices_per_call(2 * MIB, 24) == 6
    assert ring.slices_per_call(96 * MIB, 24) == 6
    assert ring.slices_per_call(97 * MIB, 24) == 12
    assert ring.slices_per_call(1024 * MIB, 24) == 6 * 11
    assert ring.slices_per_call(1024 * MIB, 8) == 6 * 32


def _loop_stamps(offset_ns: int, loops: int, local_ns: int = 20, link_ns: int = 10) -> list[int]:
    """One channel: per loop four link slices of ``link_ns``, then two local ones of ``local_ns``."""
    out, t = [], offset_ns
    for _ in range(loops):
        for s in range(6):
            t += link_ns if s < 4 else local_ns
            out.append(t)
    return out


def test_in_step_channels_share_their_local_step(ring: types.ModuleType) -> None:
    st = [_loop_stamps(0, 3), _loop_stamps(0, 3)]
    assert ring.phase_spread(st) == [0.0, 0.0, 0.0]
    # a loop is 80 ns, 40 of it local (from the fourth slice's end to the sixth's); the call runs
    # from the first stamp (10) to the last (240)
    assert ring.all_local_share(st) == pytest.approx(120 / 230)


def test_drifted_channels_overlap_less(ring: types.ModuleType) -> None:
    st = [_loop_stamps(0, 3), _loop_stamps(40, 3)]
    assert ring.phase_spread(st) == [0.04, 0.04, 0.04]  # us
    # channel 1 is in its link slices whenever channel 0 is local: never both local
    assert ring.all_local_share(st) == 0.0


def test_analyse_reads_variants_and_channels(ring: types.ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "emul.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=ring.FIELDS)
        w.writeheader()
        for variant, extra in (("nccl-ch24", 0.1), ("ch8", 0.0)):
            for mib in (64, 256, 512, 1024):
                # 3 us a MiB from 512 up; 3.3 between 64 and 256 where extra is 0.1
                us = 10 + 3 * mib + (extra * 3 * (min(mib, 256) - 256) if mib <= 256 else 0)
                w.writerow({"variant": variant, "case": "plain", "op": "all_reduce", "bytes": mib * MIB,
                            "ranks": 2, "per": 1, "reps": 1, "median_us": us, "sleep_us": 0, "k": 1})
    rows = ring.analyse([str(path)])
    ch8 = next(r for r in rows if r.startswith("| ch8 |"))
    n24 = next(r for r in rows if r.startswith("| nccl-ch24 |"))
    assert "| 349.5 | 43.7 |" in ch8 and "| +0.000 |" in ch8  # 1 MiB / 3 us = 349.5 GB/s, over 8
    assert "| +0.100 |" in n24 and "| 14.6 |" in n24


GPU = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"
RUN = "h200x2-20261129cc"


def test_run_cc_verdict_as_committed(ring: types.ModuleType) -> None:
    """Run cc's registered signatures on its committed files: H0 by the rule (the emulation's
    ramp past the L2 +0.018 against NCCL's +0.053 on the same lease), and the analysis file."""
    lines = ring.verdict(str(GPU / f"{RUN}-emul.csv"), str(GPU / f"{RUN}-ch24.csv"),
                         str(GPU / f"{RUN}-emul-stamps.csv.gz"))
    assert lines[0] == ("relative ramp 64-256 MiB (rate from 512 MiB up): NCCL (ch24) +0.053; "
                        "emulated at 24 channels +0.018, without the local step +0.009")
    assert lines[-5:] == [
        "no test (NCCL under +0.04): no",
        "HP, the protocol as emulated makes the ramp: fail",
        "HL, the local step taken in step: fail",
        "HX, the protocol but not the local step: fail",
        "H0, not reproduced: pass",
    ]
    committed = (GPU / f"{RUN}-analysis.txt").read_text().splitlines()
    assert committed[-len(lines):] == lines


def test_run_cc_channels_never_all_local_at_24(ring: types.ModuleType) -> None:
    """The lockstep reading's own test on run cc's stamps: at 24 channels no instant has every
    channel in its local step; at 8 (no ramp) they are, 6-24% of the call."""
    st = ring.load_stamps(str(GPU / f"{RUN}-emul-stamps.csv.gz"))
    assert all(ring.all_local_share(st["nccl", 24, mib]) == 0.0 for mib in (64, 256, 1024))
    assert all(0.05 < ring.all_local_share(st["nccl", 8, mib]) < 0.25 for mib in (64, 256, 1024))


def _ramp_rows(variant: str, ramp: float, us_per_mib: float) -> list[dict]:
    """Rows at 64-1024 MiB: ``us_per_mib`` from 512 up, ``ramp`` more per MiB from 64 to 256."""
    rows = []
    for mib in (64, 256, 512, 1024):
        us = 10 + us_per_mib * mib - (ramp * us_per_mib * (256 - mib) if mib <= 256 else 0)
        rows.append({"variant": variant, "case": "plain", "op": "all_reduce", "bytes": mib * MIB,
                     "ranks": 2, "per": 1, "reps": 1, "median_us": us, "sleep_us": 0, "k": 1})
    return rows


def _write(path: Path, rows: list[dict], fields: list[str]) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return str(path)


@pytest.mark.parametrize(
    ("cga4", "cga0", "cl4", "plain", "want"),
    [
        # the launch matters to NCCL and the emulation follows it
        ((0.05, 3.0), (0.01, 3.0), (0.055, 3.05), (0.0, 3.0), ("pass", "pass", "fail")),
        # NCCL's rate moves 5% with its launch; the emulation's ramp is off NCCL's
        ((0.05, 3.0), (0.05, 3.15), (0.0, 3.0), (0.05, 3.15), ("pass", "fail", "fail")),
        # nothing changes with the launch
        ((0.05, 3.0), (0.045, 3.02), (0.05, 3.0), (0.045, 3.02), ("fail", "pass", "pass")),
    ],
)
def test_verdict_cd_rules(ring: types.ModuleType, tmp_path: Path, cga4, cga0, cl4, plain, want) -> None:
    emul = _write(tmp_path / "emul.csv", _ramp_rows("cl4-ch24", *cl4) + _ramp_rows("nccl-ch24", *plain), ring.FIELDS)
    n4 = _write(tmp_path / "cga4.csv", _ramp_rows("cga4", *cga4), ring.FIELDS)
    n0 = _write(tmp_path / "cga0.csv", _ramp_rows("cga0", *cga0), ring.FIELDS)
    lines = ring.verdict_cd([emul, n4, n0])
    assert [line.rsplit(": ", 1)[1] for line in lines[-3:]] == list(want)
    assert f"  NCCL, clusters of 4: {cga4[0]:+.3f} / {MIB / cga4[1] / 1e3:.1f}" in lines


CD = "h200x2-20261129cd"


def test_run_cd_verdict_as_committed(ring: types.ModuleType) -> None:
    """Run cd on its committed files: NCCL's ramp and rate follow its cluster launch (HC), the
    emulation in clusters of 4 comes within 0.007 of NCCL's ramp but 3.8% under its rate (HE
    fails by its rate bound), and the verdict lines are the analysis file's."""
    paths = [str(GPU / f"{CD}-emul.csv")] + [str(GPU / f"{CD}-cga{k}.csv") for k in (4, 0, 1, 2, 8)]
    lines = ring.verdict_cd(paths)
    assert "  NCCL, clusters of 4: +0.122 / 351.0" in lines
    assert "  NCCL, clusters of 0: +0.066 / 309.3" in lines
    assert "  emulated, cl4-ch24: +0.115 / 337.8" in lines
    assert lines[-3:] == [
        "HC, NCCL's cluster launch sets its ramp or rate: pass",
        "HE, the emulation launched as NCCL behaves as NCCL: fail",
        "HN, the cluster launch changes nothing: fail",
    ]
    committed = (GPU / f"{CD}-analysis.txt").read_text().splitlines()
    assert committed[-len(lines):] == lines


def test_run_cd_placement_and_lockstep(ring: types.ModuleType) -> None:
    """Where the channels ran (GPU 0, 24 channels, 1 GiB): in clusters of 4, six clusters of four
    SMs; plainly, the first eight CTAs on SMs 124-131 (run cc's slow channels 0-7). In clusters the
    channels keep in step (every one in its local step at once 4-19% of the call), plainly never."""
    where = ring.load_placement(str(GPU / f"{CD}-emul-stamps.csv.gz"))
    cl4 = where["cl4", 24, 1024]
    assert sorted({cluster for _sm, cluster in cl4}) == list(range(6))
    assert all(sum(1 for _sm, c in cl4 if c == k) == 4 for k in range(6))
    assert [sm for sm, _c in where["nccl", 24, 1024][:8]] == [128, 129, 130, 131, 124, 125, 126, 127]
    st = ring.load_stamps(str(GPU / f"{CD}-emul-stamps.csv.gz"))
    assert all(0.04 <= ring.all_local_share(st["cl4", 24, mib]) <= 0.19 for mib in (64, 256, 1024))
    assert all(ring.all_local_share(st["nccl", 24, mib]) <= 0.001 for mib in (64, 256, 1024))
    assert ring.load_placement(str(GPU / f"{RUN}-emul-stamps.csv.gz")) == {}


CE = "h200x2-20261129ce"


def test_run_ce_checks_as_committed() -> None:
    """Run ce (frozen after the ring's channels went into the engine, a lease it never saw): the
    committed comparison is what ring_predict.py gives from the frozen table and the CSVs; checks
    1-4 pass (the all-reduce 1.8% / -8.7% at NCCL's defaults, 2.5-5.2% at 12-32 channels), the
    buffer check passes at 3 of 6 ratios (the 512 KiB chunk's gain over-stated, as registered)."""
    predict = bench_script("ring_predict")
    csvs = [str(GPU / f"{CE}-{v}.csv") for v in predict.VARIANTS]
    lines = predict.compare(str(GPU / f"{CE}-predicted.txt"), csvs)
    assert "\n".join(lines) + "\n" == (GPU / f"{CE}-compare.txt").read_text()
    checks = lines[2:8]
    assert all(line.endswith("| yes |") for line in checks)
    assert "| def | all_reduce | 13 | 1.8% / -8.7% | 10.2% / -17.3% | 6% / 15% | yes |" in checks
    buffer = [line for line in lines if line.startswith(("| buf1m", "| buf16m"))]
    assert [line.endswith("| yes |") for line in buffer] == [False, False, True, True, True, False]


def test_run_ce_frozen_table_reads_back() -> None:
    """The frozen table's rows: every variant's sizes, the model and the model before it."""
    predict = bench_script("ring_predict")
    frozen = predict.read_frozen(str(GPU / f"{CE}-predicted.txt"))
    assert len(frozen) == len(predict.SIZES) * sum(len(ops) for ops, _, _ in predict.VARIANTS.values())
    assert frozen["def", "all_reduce", 1024] == (3212.6, 3138.0)
    assert frozen["ch12", "all_reduce", 1024][0] > frozen["def", "all_reduce", 1024][0]


def test_plan_runs_each_op_at_its_wire_bytes(ring: types.ModuleType) -> None:
    """--ops (run cr): a row an op; the reduce-scatter's and all-gather's calls move S / 2 on the wire,
    so a trial holds as many calls as the all-reduce's of half the size."""
    rows = ring.plan(("cl4",), (4,), (2048,), 20, 5, ("all_reduce", "reduce_scatter", "all_gather"))
    assert [r["op"] for r in rows] == ["all_reduce", "reduce_scatter", "all_gather"]
    half = ring.plan(("cl4",), (4,), (1024,), 20, 5)[0]
    assert rows[1]["per"] == rows[2]["per"] == half["per"] and rows[0]["per"] <= half["per"]
    assert set(ring.OP_CODES) == set(ring.SLICES_A_LOOP) and ring.OP_CODES["all_reduce"] == 0
    with pytest.raises(SystemExit) as err:
        ring.main(["--dry-run", "--ops", "all_to_all"])
    assert err.value.code == 2


def test_slices_and_stamp_labels_by_op(ring: types.ModuleType) -> None:
    """A reduce-scatter's or all-gather's loop is channels x one 2 MiB chunk of a rank's part (S / 2):
    as many loops as the all-reduce's of S, four slices each; their stamps are labelled by op, the
    all-reduce's by the kind alone (runs cc and cd)."""
    assert ring.slices_per_call(1024 * MIB, 24, "reduce_scatter") == 4 * 11
    assert ring.slices_per_call(2 * MIB, 24, "all_gather") == 4
    assert ring.stamp_variant("cl4", "all_reduce") == "cl4"
    assert ring.stamp_variant("cl4", "reduce_scatter") == "cl4-reduce_scatter"
    assert [ring.loop_slices(v) for v in ("cl4", "nccl", "cl4-reduce_scatter", "cl4-all_gather")] == [6, 6, 4, 4]


def test_two_call_loops_share_their_local_step(ring: types.ModuleType) -> None:
    """Four slices a loop: the local step is the last two (from the send's second slice's end)."""
    def stamps(offset: int) -> list[int]:
        out, t = [], offset
        for _ in range(3):
            for s in range(4):
                t += 10 if s < 2 else 20
                out.append(t)
        return out

    st = [stamps(0), stamps(0)]
    assert ring.phase_spread(st, 4) == [0.0, 0.0, 0.0]
    # a loop is 60 ns, 40 of it local; the call runs from the first stamp (10) to the last (180)
    assert ring.all_local_share(st, 4) == pytest.approx(120 / 170)


def test_a_ring_of_n_ranks(ring: types.ModuleType) -> None:
    """Run dn: a ring of n ranks runs NCCL's runRing calls, 2n - 1 a loop for the all-reduce and n for the
    others, two slices each; a loop covers channels x n chunks of S; stamps of rings other than two say so;
    a ring of one is refused (exit 2), and cl4w launches in clusters of four like cl4."""
    assert [ring.slices_a_loop(op, 2) for op in ("all_reduce", "reduce_scatter", "all_gather")] == [6, 4, 4]
    assert [ring.slices_a_loop(op, 4) for op in ("all_reduce", "reduce_scatter", "all_gather")] == [14, 8, 8]
    assert ring.slices_per_call(128 * MIB, 24, "all_reduce", 4) == 14  # one loop of 24 x 4 x 2 MiB
    assert ring.slices_per_call(193 * MIB, 24, "all_gather", 4) == 16
    assert ring.stamp_variant("cl4w", "all_gather", 4) == "cl4w-all_gather-r4"
    assert ring.stamp_variant("cl4w", "all_reduce", 2) == "cl4w"
    rows = ring.plan(("cl4", "cl4w"), (24,), (8,), 20, 5, ("all_reduce",), 4)
    assert [(r["kind"], r["ranks"]) for r in rows] == [("cl4", 4), ("cl4w", 4)]
    for bad in (["--ranks", "1"], ["--variants", "cl4w", "--channels", "6"]):
        with pytest.raises(SystemExit) as err:
            ring.main(["--dry-run", *bad])
        assert err.value.code == 2


def test_the_post_warp_is_nccls_roles(ring: types.ModuleType) -> None:
    """cl4w's kernel (run dn) posts from the CTA's last two threads, beyond the 512 workers, and its
    workers meet at a barrier of their own before the copy (prims_simple.h's subBarrier)."""
    assert ring.POST_WARP == {"cl4w"} and ring.CLUSTER["cl4w"] == ring.CLUSTER["cl4"]
    src = ring.KERNEL
    assert "#define NWORKERS 512" in src and "__launch_bounds__(NWORKERS + 32)" in src
    assert "tid == (int)blockDim.x - 1" in src and "tid == (int)blockDim.x - 2" in src
    assert 'bar.sync 1, %0;" :: "r"(NWORKERS)' in src
