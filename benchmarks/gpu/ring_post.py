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
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdict", metavar="STAMPS", help="run ct's stamps (ring_emul.py --stamps)")
    ap.add_argument("--run", choices=("cu", "cv"), default="cu", help="which frozen check: its candidate and checks")
    ap.add_argument("--frozen", metavar="OUT", help="write the run's frozen table")
    ap.add_argument("--compare", nargs="+", metavar=("FROZEN", "CSV"), help="the frozen table, then the CSVs")
    ap.add_argument("--evaluate", action="store_true", help="rdusim fidelity --gpu with the post (about 2 minutes)")
    args = ap.parse_args(argv)
    if args.evaluate:
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
