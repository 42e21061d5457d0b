"""Run ct: what a ring slice's post costs, by the slice's bytes (frozen before the run).

Each slice of NCCL's Simple protocol ends with a post: a system fence and a flag store to the peer
(``prims_simple.h`` genericOp; ``ring_emul.py``'s kernel). The engine's ring channels
(``rdusim.sim.ring``) have no such cost; its p2p channels do (``nvlink.p2p.step``, 1.539 us a
chunk, fitted on run cg's one channel a peer). Put into the ring at that constant (analysis after
run cs, ``ring_step.py``), a post takes the committed sweeps' collectives groups from 96 to 107
within, but turns the smallest Simple sizes (2-8 MiB, slices of 10-85 KiB) from 8-17% short to 4-17%
over: as if a post cost less on a small slice. Run ct stamps the post in NCCL's protocol as
emulated (``ring_emul.py``, clusters of four, its stamps' ``wait_ns``, ``post_ns`` and ``bytes``),
at 4 and 24 channels, slices of 10 KiB to 1 MiB.

    PYTHONPATH=. python benchmarks/gpu/ring_post.py --verdict <stamps.csv.gz>
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
from collections import defaultdict

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdict", metavar="STAMPS", required=True, help="run ct's stamps (ring_emul.py --stamps)")
    print("\n".join(verdict(ap.parse_args(argv).verdict)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
