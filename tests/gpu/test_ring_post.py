"""benchmarks/gpu/ring_post.py (run ct): a slice's post by its bytes, and the registered checks on synthetic stamps."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

from .scripts import bench_script

GPU = Path(__file__).resolve().parents[2] / "benchmarks/gpu"


def _checked(run: str, lease: str) -> list[str]:
    """``ring_post.py``'s checks of run ``run``'s frozen table (cu: ``compare``, cv: ``compare_cv``)
    against the six CSVs of run ce's rows measured on lease ``lease`` (20261129ce, 20261130cu, ...)."""
    post = bench_script("ring_post")
    check = post.compare if run == "cu" else post.compare_cv
    return check(str(GPU / f"h200x2-20261130{run}-predicted.txt"),
                 [str(GPU / f"h200x2-{lease}-{v}.csv") for v in ("def", "ch12", "ch16", "ch32", "buf1m", "buf16m")])


def _stamps(path: Path, post_us) -> None:
    """The all-reduce's stamps at 4 and 24 channels: one loop (6 slices: 4 that send, then the local
    call's 2) at each slice size, each slice's post ``post_us(channels, bytes)`` (the local one 0.1 us)."""
    emul = bench_script("ring_emul")
    with gzip.open(path, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(emul.STAMP_FIELDS)
        for channels, sizes in ((4, (64 << 10, 256 << 10, 1 << 20)), (24, (10 << 10, 20 << 10, 256 << 10, 1 << 20))):
            for mib, nbytes in enumerate(sizes):
                for s in range(6):
                    post = post_us(channels, nbytes) if s < 4 else 0.1
                    w.writerow(["cl4", channels, mib, 0, s, 1000 * s, 0, 0, 50, round(1000 * post), nbytes])
            w.writerow(["cl4", channels, 99, 0, 0, 0, 0, 0, 0, 5000, 0])  # an empty slice: left out


def test_verdicts_on_synthetic_stamps(tmp_path: Path) -> None:
    post = bench_script("ring_post")
    _stamps(tmp_path / "flat.csv.gz", lambda c, b: 1.5)
    got = post.verdict(str(tmp_path / "flat.csv.gz"))
    assert "| >= 1024 KiB | 1.50 / 0.10 | 1.50 / 0.10 |" in got
    assert got[-3:] == [
        "K, a post costs the same at every slice (24 channels: large within 25% of small): pass",
        "G, a post grows with the slice (24 channels: large >= 1.5x small): fail",
        "P, p2p's post (4 channels, the median over the bins within 25% of 1.539 us): pass"]
    # a drain: 0.5 us plus a microsecond a 512 KiB
    _stamps(tmp_path / "grows.csv.gz", lambda c, b: 0.5 + b / (512 << 10))
    got = post.verdict(str(tmp_path / "grows.csv.gz"))
    assert [line.rsplit(": ", 1)[1] for line in got[-3:]] == ["fail", "pass", "fail"]  # 4 channels: 1.0 us
    assert "24 channels, small slices (< 32 KiB) / large (>= 512 KiB): 0.53 / 2.50 us" in got[-5]


def test_bins() -> None:
    post = bench_script("ring_post")
    assert [post.bin_of(b) for b in (1, 16 << 10, 100 << 10, 5 << 20)] == [0, 16 << 10, 64 << 10, 1 << 20]


def test_candidate_document_and_run_ce_post_hoc() -> None:
    """Run cu's candidate: the post, the channel's rate that keeps one channel's 21.0 GB/s (84 with no
    post), the link re-fitted; and its frozen table against run ce's lease (seen before run cu was
    registered: the buffer check 3 of 6 there, as the engine now)."""
    post = bench_script("ring_post")
    assert post.one_channel_rate(0.0) == 84e9
    assert round(post.one_channel_rate(1.539e-6) / 1e9, 2) == 86.67
    got = _checked("cu", "20261129ce")
    assert "| def | all_reduce | 13 | 1.5% / -7.0% | 1.8% / -8.7% |" in got
    assert [line.rsplit(": ", 1)[1] for line in got[-3:]] == ["pass", "fail", "pass"]


def test_run_cu_as_committed() -> None:
    """Run cu's checks are what ring_post.py prints from its files: on a new lease the candidate (a post on
    each sending slice) beats the engine now at NCCL's defaults and 12-16 channels (Q1, Q3), and gets 4
    of the 6 buffer ratios within 3 points where 5 were registered (Q2 fails: not adopted)."""
    got = _checked("cu", "20261130cu")
    assert "\n".join(got) + "\n" == (GPU / "h200x2-20261130cu-compare.txt").read_text()
    assert [line.rsplit(": ", 1)[1] for line in got[-3:]] == ["pass", "fail", "pass"]


def test_run_ct_as_committed() -> None:
    post = bench_script("ring_post")
    got = post.verdict(str(GPU / "h200x2-20261130ct-emul-stamps.csv.gz"))
    assert "\n".join(got) + "\n" == (GPU / "h200x2-20261130ct-verdict.txt").read_text()
    assert [line.rsplit(": ", 1)[1] for line in got[-3:]] == ["pass", "fail", "pass"]


def test_run_cv_candidate_from_run_ct() -> None:
    """Run cv's post: the line through run ct's median sending-slice post at 4 (1.280 us) and 24 channels
    (2.336 us); the channel's rate re-derived with the one-channel post; the candidate document carries both
    keys; the engine's post at a channel count is that line (RingChannels.post_at)."""
    from rdusim.hw.collectives import RingChannels

    post = bench_script("ring_post")
    one, per = post.ct_post_form()
    assert round(one * 1e6, 4) == 1.1216 and round(per * 1e6, 4) == 0.0528
    ring = RingChannels(24, 85.93e9, 360.5e9, 3.5e-6, one, per)
    assert round(ring.post_at(4) * 1e6, 3) == 1.280 and round(ring.post_at(24) * 1e6, 3) == 2.336
    text = post.candidate_text(one, per)
    assert 'post: "1.122 us"' in text and 'post_per_channel: "0.0528 us"' in text
    assert 'channel_bandwidth: "85.93 GB/s"' in text


def test_run_cv_checks_post_hoc() -> None:
    """Run cv's checks on run cu's lease (seen before run cv was registered): V1-V3 pass there."""
    got = _checked("cv", "20261130cu")
    assert got[-1] == "V3, the 1 MiB buffer over the default at 32, 64, 96 MiB within 3 points (+1.2, +2.0, -0.7): pass"
    assert [line.rsplit(": ", 1)[1] for line in got[-3:]] == ["pass", "pass", "pass"]


def test_run_cv_as_committed() -> None:
    """Run cv's checks are what ring_post.py prints from its files: on a fresh lease the post that grows with
    the channels passes V1-V3 (not adopted: the four-GPU sweeps regress, as registered)."""
    got = _checked("cv", "20261130cv")
    assert "\n".join(got) + "\n" == (GPU / "h200x2-20261130cv-compare.txt").read_text()
    assert [line.rsplit(": ", 1)[1] for line in got[-3:]] == ["pass", "pass", "pass"]


def test_run_dn_verdict_is_what_the_script_prints() -> None:
    """Run dn's two-rank half (h200x2-20261130dn-verdict.txt) is what ring_post.py --verdict-dn prints from
    the committed files: W1 hidden, W2 fails, D passes (nothing adopted)."""
    post = bench_script("ring_post")
    got = post.verdict_dn([str(GPU / "h200x2-20261130dn-emul-r2.csv")],
                          [str(GPU / "h200x2-20261130dn-emul-r2-stamps.csv.gz")],
                          [str(GPU / "h200x2-20261130dn-nccl-r2.csv")], str(GPU / "h200x4-20261130dn-predicted.txt"))
    assert got == (GPU / "h200x2-20261130dn-verdict.txt").read_text().splitlines()
    assert [line.split(" -> ")[-1] for line in got if line[:3] in ("W1,", "W2,")] == ["hidden", "fail"]
    assert got[-1].endswith(": pass")


def test_the_post_warp_channel_hides_a_post_shorter_than_a_slice() -> None:
    """Run dn's candidate channel (``_channel_overlapped``): one channel, a call of two sending slices and a
    local call of two. A post shorter than a slice's copy is hidden but the last; a longer one holds each
    next slice's closing barrier (closed forms, C / R a slice's copy)."""
    import dataclasses

    from rdusim.hw.collectives import RingChannels, RingPlan
    from rdusim.sim import ring as engine

    post = bench_script("ring_post")
    rate, chunk = 80e9, 4e6  # a sending call of 2 ops: each slice C / 2 at R / 2, C / R; a local slice C / R too
    copy = chunk / rate
    plan = RingPlan(RingChannels(1, rate, 1e15, 0.0), (chunk,), ((True, 2), (False, 2)))
    for p, want in ((0.4 * copy, 4 * copy), (3 * copy, 8 * copy)):
        with post.overlap_in_engine(p, 0.0):
            got = engine.ring_transfer_s(plan)
        assert abs(got - want) < 1e-12 * want
    # the serial post of runs cu and cv (the engine's own) pays both posts in full
    serial = dataclasses.replace(plan, ring=dataclasses.replace(plan.ring, post_s=0.4 * copy))
    assert abs(engine.ring_transfer_s(serial) - 4.8 * copy) < 1e-12


def test_ring_intercepts_are_what_the_script_prints() -> None:
    """After run dn: ring_intercept.py's lines through the committed sweeps' graph rows (32-128 MiB) are the
    committed table, and NCCL's intercepts sit at 25-38 us for every op on two and four ranks."""
    script = bench_script("ring_intercept")
    assert script._line([1.0, 2.0, 4.0], [3.0, 5.0, 9.0]) == (2.0, 1.0)
    got = script.table()
    assert got == (GPU / "h200x2-20261130dn-intercepts.txt").read_text().splitlines()
    measured = [float(line.split("|")[5]) for line in got[3:]]
    assert len(measured) == 36 and 24.5 <= min(measured) and max(measured) <= 39


def test_run_do_verdict_is_what_the_script_prints() -> None:
    """Run do (NCCL's ring Simple forced from 4 KiB): the committed verdict is what ring_intercept.py
    prints from its files: S1 passes (tuning.cc's fixed cost at a few KiB), S3 grows (the excess is the
    bytes'), S2 neither; the forced rows are no fidelity group, the default ones are."""
    from rdusim.analysis.gpu import fidelity as fid
    from rdusim.analysis.gpu.collectives import collective_runs

    script = bench_script("ring_intercept")
    got = script.verdict_do(str(GPU / "h200x2-20261130do-predicted.txt"), str(GPU / "h200x2-20261130do-simple.csv"),
                            str(GPU / "h200x2-20261130do-default.csv"))
    assert got == (GPU / "h200x2-20261130do-verdict.txt").read_text().splitlines()
    assert [line.rsplit(" -> ", 1)[1] for line in got[-3:]] == ["pass", "neither", "grows"]
    names = {p.name for p in collective_runs(GPU)}
    assert "h200x2-20261130do-default.csv" in names and "h200x2-20261130do-simple.csv" not in names
    assert "h200x2-20261130do-default.csv" in fid.COLLECTIVE_CSVS


def test_run_dn_has_its_own_checks_only() -> None:
    """``--run dn`` pairs with ``--frozen`` and ``--verdict-dn``; with run cu's and cv's --evaluate or
    --compare it exits 2 (their candidates are not run dn's)."""
    import pytest

    post = bench_script("ring_post")
    for argv in (["--run", "dn", "--evaluate"], ["--run", "dn", "--compare", "a.txt", "b.csv"]):
        with pytest.raises(SystemExit) as err:
            post.main(argv)
        assert err.value.code == 2


def test_a_step_before_every_slice() -> None:
    """After run dp (tried, not adopted): a step before each of a call's two slices, the channel off the
    link; the channel's rate re-derived so one channel's all-reduce loop keeps run ad's 21.0 GB/s."""
    from rdusim.hw.collectives import RING_CHUNK_BYTES, RingChannels, RingPlan
    from rdusim.sim import ring as engine

    post = bench_script("ring_post")
    assert post.step_channel_rate(0.0) == 8 * RING_CHUNK_BYTES / (2 * RING_CHUNK_BYTES / 21.0e9)
    rate = post.step_channel_rate(1e-6)
    assert abs(2 * RING_CHUNK_BYTES / (8 * RING_CHUNK_BYTES / rate + 6e-6) - 21.0e9) < 1.0
    with post.overlap_in_engine(0.0, 0.0, 1e-6):
        got = engine.ring_transfer_s(RingPlan(RingChannels(1, 80e9, 1e15, 0.0), (4e6,), ((True, 2), (False, 2))))
    assert abs(got - (4 * 4e6 / rate + 4e-6)) < 1e-15  # four slices' bytes (at the re-derived rate) and steps
