"""Run ct: what a ring slice's post costs, by the slice's bytes (frozen before the run).

Each slice of NCCL's Simple protocol ends with a post: a system fence and a flag store to the peer
(``prims_simple.h`` genericOp; ``ring_emul.py``'s kernel). The engine's ring channels
(``rdusim.sim.ring``) have no such cost; its p2p channels do (``nvlink.p2p.step``, 1.539 us a
chunk, fitted on run cg's one channel a peer). Put into the ring at that constant after every slice
(a prototype after run cs, not kept), a post takes the committed sweeps' collectives groups from 96
to 107 within, but turns the smallest Simple sizes (2-8 MiB, slices of 10-85 KiB) from 8-17% short
to 4-17% over: as if a post cost less on a small slice. Run ct stamps the post in NCCL's protocol as
emulated (``ring_emul.py``, clusters of four, its stamps' ``wait_ns``, ``post_ns`` and ``bytes``),
at 4 and 24 channels, slices of 10 KiB to 1 MiB.

    PYTHONPATH=. python benchmarks/gpu/ring_post.py --verdict <stamps.csv.gz>

Run cu (a frozen check before adoption): the post in the engine (``nvlink.ring.post``, p2p's 1.539
us, on each slice that sends, as run ct measured), the channel's rate re-derived so one channel keeps
run ad's 21.0 GB/s of wire (``one_channel_rate``), the link re-calibrated on run aa's rows as the
document's was (``candidate_text``). ``--frozen OUT`` writes what it and the engine now give for run
ce's variants (``ring_predict.py``'s: NCCL's defaults, 12, 16 and 32 channels, a 1 MiB and a 16 MiB
``NCCL_BUFFSIZE``) before the run; ``--compare FROZEN CSV...`` the registered checks
(``h200x2-20261130cu-post-hypotheses.md``).

    PYTHONPATH=. python benchmarks/gpu/ring_post.py --frozen h200x2-20261130cu-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/ring_post.py --compare h200x2-20261130cu-predicted.txt <csv>...

Run cv (``--run cv``): the same, the post growing with the channels as run ct measured it (``ct_post_form``:
the line through its 4- and 24-channel medians), with checks that leave the channels' drift out
(``compare_cv``; ``h200x2-20261130cv-post-hypotheses.md``).

``--evaluate``: ``rdusim fidelity --gpu``'s groups with the post in the engine (``post_in_engine``), beside
the engine now (``h200x2-20261130cu-evaluation.txt``).

Run dn (``--run dn``): NCCL makes a slice's post from a warp of its own while the workers copy the next
slice (``prims_simple.h``); the candidate makes run ct's post that way (``overlap_in_engine``,
``_channel_overlapped``). ``--run dn --frozen OUT`` writes its frozen table of NCCL's graph rows on two and
four ranks; ``--verdict-dn EMUL STAMPS NCCL FROZEN`` (comma-separated lists) the registered checks
(``h200x4-20261130dn-postwarp-hypotheses.md``) from ``ring_emul.py --ranks``'s files and NCCL's rows.

    PYTHONPATH=. python benchmarks/gpu/ring_post.py --verdict-dn <emul.csv> <stamps.csv.gz> <nccl.csv> \
        benchmarks/gpu/h200x4-20261130dn-predicted.txt
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ring_calls import MIB  # noqa: E402  (beside this file)

#: slice sizes (bytes) the posts are binned by: each bin from its edge to the next
BINS = (0, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20)
#: the p2p channels' post (hw_configs/h200.yaml nvlink.p2p.step), us
P2P_STEP_US = 1.539
#: the registered bounds
FLAT, GROWS, NEAR_P2P = 0.25, 1.5, 0.25
SMALL, LARGE = 32 << 10, 512 << 10  # bytes: a small slice at most, a large one at least


def bin_of(nbytes: int) -> int:
    return max(edge for edge in BINS if nbytes >= edge)


def load_posts(path: str) -> dict[tuple[str, int, bool, int], list[float]]:
    """{(stamps variant, channels, the slice sends, its bytes' bin): posts (us)} of a ``ring_emul.py``
    stamps file with run ct's columns. A slice sends unless it is its loop's last call's (the local
    ``recv`` or ``recvReduceCopy``, whose post is a flag store without the fence); empty slices are
    left out."""
    from ring_emul import loop_slices

    out: dict[tuple[str, int, bool, int], list[float]] = defaultdict(list)
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            nbytes = int(r["bytes"])
            if nbytes == 0:
                continue
            per_loop = loop_slices(r["variant"])
            sends = int(r["slice"]) % per_loop < per_loop - 2
            out[r["variant"], int(r["channels"]), sends, bin_of(nbytes)].append(int(r["post_ns"]) / 1e3)
    return dict(out)


def medians(posts: dict[tuple[str, int, bool, int], list[float]], channels: int, sends: bool = True) -> dict[int, float]:
    """{bin: the median post (us)} of every op's slices at ``channels``."""
    pooled: dict[int, list[float]] = defaultdict(list)
    for (_, c, s, b), us in posts.items():
        if c == channels and s == sends:
            pooled[b] += us
    return {b: statistics.median(v) for b, v in sorted(pooled.items())}


def _kib(b: int) -> str:
    return f">= {b >> 10} KiB" if b else "< 16 KiB"


def verdict(path: str) -> list[str]:
    posts = load_posts(path)
    chans = sorted({k[1] for k in posts})
    lines = ["A slice's post (fence and flag stores), median us by the slice's bytes: slices that send (all ops); "
             "the local call's slices (a flag store) after the slash", "",
             "| slice | " + " | ".join(f"{c} channels" for c in chans) + " |", "|---|" + "---:|" * len(chans)]
    table = {c: (medians(posts, c), medians(posts, c, sends=False)) for c in chans}
    for b in BINS:
        cells = []
        for c in chans:
            send, local = table[c]
            cells.append(f"{send[b]:.2f} / {local[b]:.2f}" if b in send and b in local
                         else f"{send[b]:.2f} / -" if b in send else "-")
        lines.append(f"| {_kib(b)} | " + " | ".join(cells) + " |")

    send24 = table[max(chans)][0]
    s24 = statistics.median(v for b, v in send24.items() if b < SMALL)
    l24 = statistics.median(v for b, v in send24.items() if b >= LARGE)
    mid4 = statistics.median(table[min(chans)][0].values())
    checks = {
        f"K, a post costs the same at every slice ({max(chans)} channels: large within {100 * FLAT:.0f}% of small)":
            abs(l24 / s24 - 1) <= FLAT,
        f"G, a post grows with the slice ({max(chans)} channels: large >= {GROWS}x small)": l24 >= GROWS * s24,
        f"P, p2p's post ({min(chans)} channels, the median over the bins within {100 * NEAR_P2P:.0f}% of "
        f"{P2P_STEP_US} us)": abs(mid4 / P2P_STEP_US - 1) <= NEAR_P2P,
    }
    return lines + ["", f"{max(chans)} channels, small slices (< {SMALL >> 10} KiB) / large (>= {LARGE >> 10} KiB): "
                    f"{s24:.2f} / {l24:.2f} us; {min(chans)} channels, the median over the bins: {mid4:.2f} us", ""] + [
        f"{name}: {'pass' if ok else 'fail'}" for name, ok in checks.items()]


#: one ring channel's all-reduce on two GPUs, GB/s of wire (run ad on two H100s, run ar on two H200s; the
#: documents' ``channel_bandwidth`` comment), and the calibration rows of h200.yaml's link (run aa)
ONE_CHANNEL_WIRE = 21.0e9
CALIBRATION = "benchmarks/gpu/h200x2-20261128aa-sweep.csv"


def one_channel_rate(post_s: float) -> float:
    """``channel_bandwidth`` with a post on each sending slice: one channel's all-reduce loop on two GPUs
    is 8 operations over 2 wire chunks of 2 MiB and 4 posts (``send``'s and ``recvReduceCopySend``'s two
    slices each), at ``ONE_CHANNEL_WIRE``."""
    from rdusim.hw.collectives import RING_CHUNK_BYTES, RING_SLICES

    posts_a_wire_byte = 2 * RING_SLICES * post_s / (2 * RING_CHUNK_BYTES)
    return 4 / (1 / ONE_CHANNEL_WIRE - posts_a_wire_byte)


def ct_post_form(path: str = "benchmarks/gpu/h200x2-20261130ct-emul-stamps.csv.gz") -> tuple[float, float]:
    """Run cv's post from run ct's stamps: (the post with one channel, what each further channel adds),
    seconds, the line through the median post of every sending slice at 4 and at 24 channels."""
    from ring_calls import ROOT

    posts = load_posts(str(ROOT / path))
    at = {c: statistics.median(us for (_, ch, sends, _), v in posts.items() if ch == c and sends for us in v)
          for c in (4, 24)}
    per = (at[24] - at[4]) / 20
    return (at[4] - 3 * per) * 1e-6, per * 1e-6


#: the candidates (post with one channel, each further channel's, seconds): run cu's p2p constant, run cv's
#: run ct line
def candidates() -> dict[str, tuple[float, float]]:
    return {"cu": (P2P_STEP_US * 1e-6, 0.0), "cv": ct_post_form()}


def candidate_text(post_s: float = P2P_STEP_US * 1e-6, per_channel_s: float = 0.0) -> str:
    """h200.yaml with the post (``nvlink.ring.post``), the channel's rate re-derived and the link
    re-calibrated on ``CALIBRATION`` (``collectives.fit_ring_link``, as the document's was)."""
    import dataclasses
    import re

    from ring_calls import ROOT

    from rdusim.analysis.gpu.collectives import fit_ring_link
    from rdusim.analysis.gpu.measured import read_csv
    from rdusim.hw.gpu import load_gpu_node

    text = (ROOT / "hw_configs/h200.yaml").read_text()
    ring = load_gpu_node(ROOT / "hw_configs/h200.yaml").gpu.fabric.ring
    rate = one_channel_rate(post_s)
    ring = dataclasses.replace(ring, channel_bytes_per_s=rate, post_s=post_s, post_per_channel_s=per_channel_s)
    link = fit_ring_link(read_csv(ROOT / CALIBRATION), ring)
    # the ring section's own keys (four spaces in), not nvlink.p2p_ll_channel_bandwidth
    text, n1 = re.subn(r'(?m)^    channel_bandwidth: "[0-9.]+ GB/s"', f'    channel_bandwidth: "{rate / 1e9:.2f} GB/s"',
                       text)
    text, n2 = re.subn(r'(?m)^    link_bandwidth: "[0-9.]+ GB/s"', f'    link_bandwidth: "{link / 1e9:.1f} GB/s"', text)
    post = f'    post: "{post_s * 1e6:.3f} us"\n' + (
        f'    post_per_channel: "{per_channel_s * 1e6:.4f} us"\n' if per_channel_s else "")
    text, n3 = re.subn(r'(\n    launch_skew: "[0-9.]+ us"\n)', f'\\1{post}', text)
    assert (n1, n2, n3) == (1, 1, 1), "h200.yaml's ring section moved"
    return text


def frozen_table(run: str = "cu") -> list[str]:
    import tempfile

    from ring_predict import SIZES as P_SIZES
    from ring_predict import VARIANTS

    with tempfile.TemporaryDirectory() as tmp:
        doc = Path(tmp) / "h200-post.yaml"
        text = candidate_text(*candidates()[run])
        doc.write_text(text)
        ring = [line.strip() for line in text.splitlines() if line.strip().startswith(
            ("channel_bandwidth:", "link_bandwidth:", "post:", "post_per_channel:"))]
        lines = [f"# Run {run}, frozen before the run: NCCL's graph rows on two H200s; `post` the engine with a post on",
                 f"# each sending slice ({', '.join(ring)}), `now` hw_configs/h200.yaml as committed.",
                 "| variant | op | MiB | post (us) | now (us) |", "|---|---|---:|---:|---:|"]
        from ring_predict import predict

        for variant, (ops, _, _) in VARIANTS.items():
            for op in ops:
                for mib in P_SIZES:
                    lines.append(f"| {variant} | {op} | {mib} | {predict(variant, op, mib * MIB, doc)[0]:.1f} | "
                                 f"{predict(variant, op, mib * MIB)[0]:.1f} |")
    return lines


#: the registered checks (rows from CHECK_FROM MiB): the defaults' medians no worse than the engine now's
#: and the all-reduce's at most MAX_AR; the buffer ratios within BUFFER_POINTS at >= BUFFER_PASS of 6
CHECK_FROM, MAX_AR, BUFFER_PASS, CHANNELS_MEDIAN = 8, 0.05, 5, 0.06


DEFAULT_OPS = ("all_reduce", "reduce_scatter", "all_gather")


def _tables(frozen_path: str, csv_paths: list[str]) -> tuple[list[str], dict, dict, int]:
    """The rows' errors and the buffer ratios of a frozen table (``post`` and ``now`` columns) against
    the CSVs: (the two tables' lines, {(variant, op): (post's median, now's median)}, {(variant, op, MiB):
    measured us}, the buffer ratios within ``BUFFER_POINTS``)."""
    from ring_predict import BUFFER_POINTS, BUFFER_SIZES, frozen_rows, read_measured

    frozen, measured = frozen_rows(frozen_path, 2), read_measured(csv_paths)

    def stats(variant: str, op: str, i: int) -> tuple[float, float, int]:
        keys = [k for k in sorted(frozen) if k[:2] == (variant, op) and k[2] >= CHECK_FROM and k in measured]
        errs = [frozen[k][i] / measured[k] - 1 for k in keys]
        return statistics.median(abs(e) for e in errs), max(errs, key=abs), len(keys)

    lines = ["| variant | op | rows | post: median / worst | now: median / worst |", "|---|---|---:|---|---|"]
    med = {}
    for variant, op in [("def", o) for o in DEFAULT_OPS] + [
            (v, "all_reduce") for v in ("ch12", "ch16", "ch32", "buf1m", "buf16m")]:
        (pm, pw, n), (nm, nw, _) = stats(variant, op, 0), stats(variant, op, 1)
        med[variant, op] = (pm, nm)
        lines.append(f"| {variant} | {op} | {n} | {100 * pm:.1f}% / {100 * pw:+.1f}% | {100 * nm:.1f}% / {100 * nw:+.1f}% |")
    lines += ["", "| buffer | MiB | measured / default | post / default | now / default |", "|---|---:|---:|---:|---:|"]
    close = 0
    for variant in ("buf1m", "buf16m"):
        for mib in BUFFER_SIZES:
            mine, base = (variant, "all_reduce", mib), ("def", "all_reduce", mib)
            m = measured[mine] / measured[base]
            p, n = (frozen[mine][i] / frozen[base][i] for i in (0, 1))
            close += abs(p - m) <= BUFFER_POINTS
            lines.append(f"| {variant} | {mib} | {m:.3f} | {p:.3f} | {n:.3f} |")
    return lines, med, {"frozen": frozen, "measured": measured}, close


def _defaults_no_worse(med: dict) -> bool:
    """Q1 and V1: NCCL's defaults no worse with the post for every op, its all-reduce within ``MAX_AR``."""
    return all(med["def", op][0] <= med["def", op][1] for op in DEFAULT_OPS) and med["def", "all_reduce"][0] <= MAX_AR


def compare(frozen_path: str, csv_paths: list[str]) -> list[str]:
    """Run cu's registered checks (``h200x2-20261130cu-post-hypotheses.md``) after the two tables."""
    from ring_predict import BUFFER_POINTS

    lines, med, _, close = _tables(frozen_path, csv_paths)
    q3 = all(med[v, "all_reduce"][0] <= CHANNELS_MEDIAN for v in ("ch12", "ch16", "ch32"))
    return lines + ["",
                    f"Q1, NCCL's defaults no worse than now, the all-reduce within {100 * MAX_AR:.0f}%: "
                    f"{'pass' if _defaults_no_worse(med) else 'fail'}",
                    f"Q2, the buffer ratios within {100 * BUFFER_POINTS:.0f} points at {BUFFER_PASS} of 6 or more "
                    f"({close}): {'pass' if close >= BUFFER_PASS else 'fail'}",
                    f"Q3, 12, 16 and 32 channels within {100 * CHANNELS_MEDIAN:.0f}% (median): {'pass' if q3 else 'fail'}"]


@contextlib.contextmanager
def post_in_engine(post_s: float = P2P_STEP_US * 1e-6, per_channel_s: float = 0.0) -> Iterator[None]:
    """The engine's ring transfers with a post on each sending slice and the channel's rate that keeps
    one channel's 21.0 GB/s (``one_channel_rate``), whatever the document says (both GPUs' documents
    derive their rate from the same figure); each run's link is re-fitted through them as before."""
    import dataclasses
    import functools

    from rdusim.analysis.gpu import collectives
    from rdusim.sim import ring as engine

    saved = engine.ring_transfer_s, collectives.ring_transfer_s
    rate = one_channel_rate(post_s)

    @functools.lru_cache(maxsize=4096)
    def transfer(plan):
        ring = dataclasses.replace(plan.ring, channel_bytes_per_s=rate, post_s=post_s, post_per_channel_s=per_channel_s)
        return saved[0](dataclasses.replace(plan, ring=ring))

    engine.ring_transfer_s = collectives.ring_transfer_s = transfer
    try:
        yield
    finally:
        engine.ring_transfer_s, collectives.ring_transfer_s = saved


def evaluate(run: str = "cu") -> list[str]:
    """``rdusim fidelity --gpu`` with the engine as it is and with the post (``post_in_engine``): the
    gated collectives groups, every group whose verdict moved, and the other groups a collective is in."""
    from ring_calls import _evaluation
    from ring_queue import _fidelity_rows

    now = _fidelity_rows(contextlib.nullcontext())
    post_s, per_channel_s = candidates()[run]
    post = _fidelity_rows(post_in_engine(post_s, per_channel_s))
    lines = [f"rdusim fidelity --gpu with a post of {1e6 * post_s:.3f} us + {1e6 * per_channel_s:.4f} us a further "
             f"channel on each sending slice (channel {one_channel_rate(post_s) / 1e9:.2f} GB/s): the engine now "
             "-> with the post", "",
             *_evaluation(now, post, ("now", "post")), "", "Groups whose verdict or (outside the collectives) "
             "median moved: median / worst, now -> post",
             "| set | GPUs | kind | now | post | verdict |", "|---|---|---|---|---|---|"]
    key = lambda r: (r["set"], r["gpu"], r["kind"], r["role"])  # noqa: E731
    before = {key(r): r for r in now}
    for r in post:
        o = before[key(r)]
        if o["within"] != r["within"] or (not r["kind"].startswith("collectives")
                                          and o["median_abs_error"] != r["median_abs_error"]):
            cells = [f"{100 * float(x['median_abs_error']):.1f}% / {100 * float(x['worst_error']):+.1f}%" for x in (o, r)]
            lines.append(f"| {r['set']} | {r['gpu']} | {r['kind']} | {cells[0]} | {cells[1]} | "
                         f"{o['within']} -> {r['within']} |")
    return lines


#: run cv's checks: the channel counts its form is tested at, and the buffer sizes where the chunk, not the
#: channels' drift, sets the 1 MiB buffer's time (at most one default loop, 96 MiB)
CV_CHANNELS, CV_BUFFER_SIZES = ("ch12", "ch16", "ch32"), (32, 64, 96)


def compare_cv(frozen_path: str, csv_paths: list[str]) -> list[str]:
    """Run cv's registered checks (``h200x2-20261130cv-post-hypotheses.md``) after the two tables."""
    from ring_predict import BUFFER_POINTS

    lines, med, rows, _ = _tables(frozen_path, csv_paths)
    frozen, measured = rows["frozen"], rows["measured"]
    v2 = all(med[v, "all_reduce"][0] <= min(med[v, "all_reduce"][1], CHANNELS_MEDIAN) for v in CV_CHANNELS)
    apart = []
    for mib in CV_BUFFER_SIZES:
        mine, base = ("buf1m", "all_reduce", mib), ("def", "all_reduce", mib)
        apart.append(frozen[mine][0] / frozen[base][0] - measured[mine] / measured[base])
    v3 = all(abs(x) <= BUFFER_POINTS for x in apart)
    return lines + [
        "",
        f"V1, NCCL's defaults no worse than now, the all-reduce within {100 * MAX_AR:.0f}%: "
        f"{'pass' if _defaults_no_worse(med) else 'fail'}",
        f"V2, 12, 16 and 32 channels no worse than now and within {100 * CHANNELS_MEDIAN:.0f}%: {'pass' if v2 else 'fail'}",
        f"V3, the 1 MiB buffer over the default at {', '.join(map(str, CV_BUFFER_SIZES))} MiB within "
        f"{100 * BUFFER_POINTS:.0f} points ({', '.join(f'{100 * x:+.1f}' for x in apart)}): {'pass' if v3 else 'fail'}"]


# --- run dn: where NCCL makes the post (a warp of its own), on two and four ranks --------------------------

#: run dn's rows: NCCL's graph rows and the emulation's, MiB, at two and four ranks (h200x4-20261130dn-*)
DN_SIZES, DN_RANKS, DN_OPS = (2, 4, 8, 16, 32, 64, 128), (2, 4), ("all_reduce", "reduce_scatter", "all_gather")
#: the registered bounds: W1's share of the serial posts the post warp hides (16-128 MiB), W3's post by ranks
HIDDEN, HELD, POST_RANKS = 0.5, 0.25, 0.25


def _channel_overlapped(env, link, plan, rate: float, start: float, step: float = 0.0):
    """Run dn's candidate channel (``rdusim.sim.ring._channel`` with NCCL's post warp, prims_simple.h): a
    sending slice's post runs beside the next slice's wait and copy; the barrier that ends a slice's copy
    waits for the previous slice's post, and the call's last post ends the channel. ``step`` (tried after
    run dp, not frozen): every slice's flag wait and barriers before its copy, the channel off the link."""
    from rdusim.hw.collectives import RING_SLICES
    from rdusim.sim.resources import delay

    post = plan.ring.post_at(plan.ring.channels)
    slices = RING_SLICES if post or step else 1
    posted = 0.0  # when the post warp is done with the posts so far
    if start:
        yield delay(env, start)
    for chunk in plan.chunks:
        for on_link, ops in plan.primitives:
            for _ in range(slices):
                if step:
                    yield delay(env, step)
                if on_link:
                    yield link.transfer(chunk / slices, rate / ops)
                else:
                    yield delay(env, chunk / slices * ops / rate)
                if posted > env.now:
                    yield delay(env, posted - env.now)
                if on_link and post:
                    posted = env.now + post
    if posted > env.now:
        yield delay(env, posted - env.now)


@contextlib.contextmanager
def overlap_in_engine(post_s: float, per_channel_s: float, step_s: float = 0.0) -> Iterator[None]:
    """The engine's ring channels with run dn's candidate: run ct's post (``post_s`` with one channel, plus
    ``per_channel_s`` a further one) on each sending slice, made by the post warp beside the next slice
    (``_channel_overlapped``); the channel's rate as documented (one channel's 1 MiB slices hide their
    posts, so run ad's 21.0 GB/s needs no re-derivation) and each run's link re-fitted through it as before.
    ``step_s`` (after run dp): a step before every slice, the channel's rate re-derived for one channel's
    six steps a loop (``step_channel_rate``)."""
    import dataclasses
    import functools

    from rdusim.analysis.gpu import collectives
    from rdusim.sim import ring as engine

    saved = engine.ring_transfer_s, collectives.ring_transfer_s, engine._channel
    simulate = saved[0].__wrapped__
    rate = {"channel_bytes_per_s": step_channel_rate(step_s)} if step_s else {}

    @functools.lru_cache(maxsize=8192)
    def transfer(plan):
        ring = dataclasses.replace(plan.ring, post_s=post_s, post_per_channel_s=per_channel_s, **rate)
        return simulate(dataclasses.replace(plan, ring=ring))

    engine._channel = functools.partial(_channel_overlapped, step=step_s)
    engine.ring_transfer_s = collectives.ring_transfer_s = transfer
    try:
        yield
    finally:
        engine.ring_transfer_s, collectives.ring_transfer_s, engine._channel = saved


def step_channel_rate(step_s: float) -> float:
    """``channel_bytes_per_s`` with a step before each slice: one channel's all-reduce loop on two GPUs is 8
    operations over 2 wire chunks and 6 slices (4 sending, 2 local), at ``ONE_CHANNEL_WIRE``; its posts
    hidden behind 1 MiB slices."""
    from rdusim.hw.collectives import RING_CHUNK_BYTES, RING_SLICES

    loop_s = 2 * RING_CHUNK_BYTES / ONE_CHANNEL_WIRE - 3 * RING_SLICES * step_s
    return 8 * RING_CHUNK_BYTES / loop_s


def evaluate_step(step_s: float) -> list[str]:
    """``rdusim fidelity --gpu`` with run dn's candidate and a step of ``step_s`` before every slice
    (tried after run dp; not frozen, not adopted), beside the engine as committed."""
    from ring_calls import _evaluation, _moved
    from ring_queue import _fidelity_rows

    now = _fidelity_rows(contextlib.nullcontext())
    new = _fidelity_rows(overlap_in_engine(*ct_post_form(), step_s))
    return [f"rdusim fidelity --gpu with run dn's post warp and a step of {1e6 * step_s:g} us before every slice "
            f"(channel {step_channel_rate(step_s) / 1e9:.2f} GB/s): the engine now -> with both", "",
            *_evaluation(now, new, ("now", "step")), "", *_moved(now, new, "step")]


def frozen_table_dn() -> list[str]:
    """Run dn's frozen table: NCCL's graph rows at two and four ranks as h200.yaml prices them (nothing
    refitted), with run dn's candidate (``overlap``) and as committed (``now``)."""
    from ring_calls import ROOT

    from rdusim.analysis.gpu.collectives import predict_us
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h200.yaml").gpu
    post_s, per_s = ct_post_form()

    def table(patch) -> dict:
        with patch:
            return {(r, op, mib): predict_us(gpu, op, mib * MIB, r, "graph")[0]
                    for r in DN_RANKS for op in DN_OPS for mib in DN_SIZES}

    over, now = table(overlap_in_engine(post_s, per_s)), table(contextlib.nullcontext())
    lines = ["# Run dn, frozen before the run: NCCL's graph rows on two and four H200s, hw_configs/h200.yaml as committed;",
             f"# `overlap` with a post of {1e6 * post_s:.3f} us + {1e6 * per_s:.4f} us a further channel on each sending",
             "# slice, made beside the next slice (NCCL's post warp), `now` the engine as committed.",
             "| ranks | op | MiB | overlap (us) | now (us) |", "|---|---|---:|---:|---:|"]
    lines += [f"| r{r} | {op} | {mib} | {over[r, op, mib]:.1f} | {now[r, op, mib]:.1f} |"
              for r in DN_RANKS for op in DN_OPS for mib in DN_SIZES]
    return lines


def _emulated(paths: list[str]) -> dict[tuple[str, int, int, str, int], float]:
    """ring_emul.py's CSVs: {(kind, channels, ranks, op, MiB): us a call}."""
    out = {}
    for path in paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                kind, _, ch = r["variant"].rpartition("-ch")
                out[kind, int(ch), int(r["ranks"]), r["op"], int(r["bytes"]) // MIB] = float(r["median_us"])
    return out


def _nccl(paths: list[str]) -> dict[tuple[int, str, int], float]:
    """collective_ramp_diag.py's CSVs (NCCL's defaults, graph): {(ranks, op, MiB): us a call}."""
    out = {}
    for path in paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["case"] == "plain":
                    out[int(r["ranks"]), r["op"], int(r["bytes"]) // MIB] = float(r["median_us"])
    return out


def _sending_posts(paths: list[str]) -> dict[tuple[str, int, int], tuple[float, int]]:
    """The stamps files' rows: {(stamps variant, channels, MiB): (the median post of a sending slice, us,
    the sending slices a channel's call)}; a sending slice is one with a post over 0.2 us (a fence), the
    local call's flag store taking 0.03 (run ct)."""
    posts: dict[tuple[str, int, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in paths:
        with gzip.open(path, "rt", newline="") as fh:
            for r in csv.DictReader(fh):
                if int(r["post_ns"]) > 200:
                    posts[r["variant"], int(r["channels"]), int(r["mib"])][int(r["channel"])].append(
                        int(r["post_ns"]) / 1e3)
    return {k: (statistics.median(x for ch in v.values() for x in ch), max(len(ch) for ch in v.values()))
            for k, v in posts.items()}


def verdict_dn(emul: list[str], stamps: list[str], nccl: list[str], frozen_path: str) -> list[str]:
    """Run dn's registered checks (``h200x4-20261130dn-postwarp-hypotheses.md``) from its files."""
    from ring_emul import stamp_variant
    from ring_predict import frozen_rows

    t, posts, real = _emulated(emul), _sending_posts(stamps), _nccl(nccl)
    ranks = sorted({k[2] for k in t})  # the ranks measured (the addendum: two first, four when lent)
    lines = ["Emulated (24 channels), us a call: serial post (cl4) / post warp (cl4w); the serial posts a channel's "
             "call (sending slices x their median post); the share of them the post warp hides",
             "| ranks | op | MiB | cl4 | cl4w | posts | hidden | NCCL |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    hidden: dict[int, list[float]] = defaultdict(list)
    for r in ranks:
        for op in DN_OPS:
            for mib in DN_SIZES:
                a, b = t.get(("cl4", 24, r, op, mib)), t.get(("cl4w", 24, r, op, mib))
                post, n = posts.get((stamp_variant("cl4", op, r), 24, mib), (math.nan, 0))
                share = (a - b) / (post * n) if a and b and n else math.nan
                if mib >= 16 and not math.isnan(share):
                    hidden[r].append(share)
                lines.append(f"| {r} | {op} | {mib} | {a or math.nan:.1f} | {b or math.nan:.1f} | {post * n:.1f} | "
                             f"{share:.2f} | {real.get((r, op, mib), math.nan):.1f} |")
    w1 = {r: statistics.median(v) for r, v in hidden.items() if v}
    lines += ["", "W1, the post warp hides the posts (median share, 16-128 MiB, three ops): " + ", ".join(
        f"{r} ranks {w1[r]:.2f}" for r in sorted(w1)) + " -> " + (
        "hidden" if w1 and all(v >= HIDDEN for v in w1.values())
        else "held" if w1 and all(v <= HELD for v in w1.values()) else "neither")]
    w2 = {}
    for r in ranks:
        for kind in ("cl4", "cl4w"):
            errs = [abs(t[kind, 24, r, "all_reduce", m] / real[r, "all_reduce", m] - 1) for m in DN_SIZES
                    if m >= 8 and (kind, 24, r, "all_reduce", m) in t and (r, "all_reduce", m) in real]
            w2[r, kind] = statistics.median(errs) if errs else math.nan
    ok2 = all(w2[r, "cl4w"] < w2[r, "cl4"] for r in ranks)
    lines.append("W2, NCCL's all-reduce is the post warp's (median |emulated / NCCL - 1|, 8-128 MiB): " + ", ".join(
        f"{r} ranks cl4 {100 * w2[r, 'cl4']:.1f}% / cl4w {100 * w2[r, 'cl4w']:.1f}%" for r in ranks)
        + f" -> {'pass' if ok2 else 'fail'}")
    w3 = []
    for ch in (4, 24):
        at = {r: statistics.median(posts[k][0] for k in posts if k[1] == ch and k[0].startswith("cl4w")
                                   and k[0].endswith("-r4") == (r == 4)) for r in ranks}
        w3.append((ch, at))
    if ranks == list(DN_RANKS):
        ok3 = all(abs(at[4] / at[2] - 1) <= POST_RANKS for _, at in w3)
        lines.append("W3, the post warp's post on four ranks as on two (within 25%): " + ", ".join(
            f"{ch} channels {at[2]:.2f} / {at[4]:.2f} us" for ch, at in w3) + f" -> {'pass' if ok3 else 'fail'}")
    else:
        lines.append("W3, the post warp's post by ranks: " + ", ".join(
            f"{ch} channels " + " / ".join(f"{at[r]:.2f} us ({r} ranks)" for r in ranks) for ch, at in w3)
            + " -> waits for the other ranks")
    frozen = frozen_rows(frozen_path, 2)
    lines += ["", "NCCL's graph rows against the frozen table: median abs error / worst, overlap and now",
              "| ranks | op | rows | overlap | now |", "|---|---|---:|---|---|"]
    no_worse = True
    for r in ranks:
        for op in DN_OPS:
            keys = [(f"r{r}", op, m) for m in DN_SIZES if (r, op, m) in real]
            stats = []
            for i in (0, 1):
                errs = [frozen[k][i] / real[r, op, k[2]] - 1 for k in keys]
                stats.append((statistics.median(abs(e) for e in errs), max(errs, key=abs)))
            no_worse &= stats[0][0] <= stats[1][0]
            lines.append(f"| {r} | {op} | {len(keys)} | {100 * stats[0][0]:.1f}% / {100 * stats[0][1]:+.1f}% | "
                         f"{100 * stats[1][0]:.1f}% / {100 * stats[1][1]:+.1f}% |")
    lines.append(f"D, the candidate no worse than now for every op and ranks: {'pass' if no_worse else 'fail'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdict", metavar="STAMPS", help="run ct's stamps (ring_emul.py --stamps)")
    ap.add_argument("--run", choices=("cu", "cv", "dn"), default="cu", help="which frozen check: its candidate and checks")
    ap.add_argument("--evaluate-step", type=float, metavar="US",
                    help="rdusim fidelity --gpu with run dn's candidate and a step before every slice (after run dp)")
    ap.add_argument("--verdict-dn", nargs=4, metavar=("EMUL", "STAMPS", "NCCL", "FROZEN"),
                    help="run dn's checks: comma-separated emulation CSVs, stamps, NCCL CSVs, then the frozen table")
    ap.add_argument("--frozen", metavar="OUT", help="write the run's frozen table")
    ap.add_argument("--compare", nargs="+", metavar=("FROZEN", "CSV"), help="the frozen table, then the CSVs")
    ap.add_argument("--evaluate", action="store_true", help="rdusim fidelity --gpu with the post (about 2 minutes)")
    args = ap.parse_args(argv)
    if args.run == "dn" and (args.evaluate or args.compare):
        ap.error("--run dn has --frozen and --verdict-dn only")
    if args.evaluate_step is not None:
        print("\n".join(evaluate_step(args.evaluate_step * 1e-6)))
    elif args.verdict_dn:
        emul, stamps, nccl, frozen = args.verdict_dn
        print("\n".join(verdict_dn(emul.split(","), stamps.split(","), nccl.split(","), frozen)))
    elif args.frozen and args.run == "dn":
        Path(args.frozen).write_text("\n".join(frozen_table_dn()) + "\n")
    elif args.evaluate:
        print("\n".join(evaluate(args.run)))
    elif args.verdict:
        print("\n".join(verdict(args.verdict)))
    elif args.frozen:
        Path(args.frozen).write_text("\n".join(frozen_table(args.run)) + "\n")
    elif args.compare and len(args.compare) >= 2:
        print("\n".join((compare if args.run == "cu" else compare_cv)(args.compare[0], args.compare[1:])))
    else:
        ap.error("--verdict STAMPS, --frozen OUT, --compare FROZEN CSV... or --evaluate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
