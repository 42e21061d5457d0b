"""Run cg: does a p2p channel's turn carry a fixed cost a chunk? Registered before the run.

Run cf (docs/gpu.md, "Run cf") left a candidate, turns (``a2a_turns.py``: a channel sends a chunk
on NVLink, then copies one out of its FIFO, in turn, the channels on one link), that fits every
committed all-to-all group at run cf's one-channel rates but misses run ar's 128 KiB chunk by 16%:
four times the chunks cost NCCL 7-11% at an equal channel count. HTc gives each turn a fixed cost
besides its rate:

    send turn:    c_send + chunk / send          (on NVLink, the channels sharing the link)
    receive turn: c_recv + chunk / recv          (local)

and the receiver copies the last chunk out after it lands (one way). Calibration (this run's
one-channel rows only, NCCL_MIN/MAX_P2P_NCHANNELS=2, graph rows): at each chunk (128, 256 and 512
KiB, ``NCCL_P2P_NVL_CHUNKSIZE``) the marginal time a byte from 2 to 8 MiB of S, one way and both
ways; a line in 1 / chunk gives 1 / send and c_send (one way) and 1 / send + 1 / recv and
c_send + c_recv (both ways). Predicted with those four constants and nothing else (``h200.yaml``'s
link and launch skew as committed; NCCL's channels a peer by its rule): this run's rows with NCCL's
p2p channels (16 or 32 a peer) at 128, 256 and 512 KiB chunks, at sizes never measured for 512 KiB.
HT (no fixed cost: one channel's 512 KiB rates, as run cf) beside it.

    PYTHONPATH=. python benchmarks/gpu/a2a_step_cost.py --compare <run cg csv>...

Checks: ``h200x2-20261130cg-a2a-hypotheses.md`` (committed with this script, before the run).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

import a2a_turns as turns

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
KIB = 1 << 10
CHUNKS = {"c128": 128 * KIB, "c256": 256 * KIB, "c512": 512 * KIB}
#: the prediction variants: NCCL's p2p channels at a chunk
PREDICTED = {"d128": 128 * KIB, "d256": 256 * KIB, "d512": 512 * KIB}
FIT = (2, 8)  # MiB of S: the one-channel rows' marginal


@dataclasses.dataclass(frozen=True)
class Turns:
    """A p2p channel's turns (module docstring): rates in bytes/s, fixed costs in seconds."""

    send: float
    recv: float
    c_send: float = 0.0
    c_recv: float = 0.0


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def slopes(meas) -> dict[str, tuple[float, float]]:
    """Chunk variant -> (one way, both ways): the one-channel rows' marginal seconds a byte of the
    part between FIT's sizes (graph rows)."""
    out = {}
    for variant in CHUNKS:
        def slope(op: str, variant: str = variant) -> float:
            pts = {m: us for (v, c, o, m), us in meas.items() if (v, c, o) == (variant, "plain", op)}
            lo, hi = FIT
            return (pts[hi] - pts[lo]) * 1e-6 / ((hi - lo) * MIB / 2)
        out[variant] = (slope("send_oneway"), slope("sendrecv"))
    return out


def fit(meas) -> Turns:
    """HTc's four constants from the one-channel rows (module docstring)."""
    s = slopes(meas)
    inv = [1 / CHUNKS[v] for v in CHUNKS]
    a1, b1 = _line(inv, [s[v][0] for v in CHUNKS])
    a2, b2 = _line(inv, [s[v][1] for v in CHUNKS])
    return Turns(send=1 / a1, recv=1 / (a2 - a1), c_send=b1, c_recv=b2 - b1)


def fit_plain(meas) -> Turns:
    """HT: no fixed cost, the rates of the 512 KiB chunk's one-channel rows."""
    one, both = slopes(meas)["c512"]
    return Turns(send=1 / one, recv=1 / (both - one))


def transfer_s(ring, channels: int, chunks: tuple[float, ...], t: Turns, oneway: bool) -> float:
    """Seconds from the first channel's start to the last one's end: each channel a SimPy process
    taking its turns (send on the shared link, at most ``t.send``; receive local), started across
    ``ring.launch_skew_s``; one way, the receiver's last copy out after it."""
    import simpy

    from rdusim.sim.resources import CappedPool, delay

    env = simpy.Environment()
    link = CappedPool(env, ring.link_bytes_per_s)

    def channel(start: float):
        if start:
            yield delay(env, start)
        for chunk in chunks:
            if t.c_send:
                yield delay(env, t.c_send)
            yield link.transfer(chunk, t.send)
            if not oneway:
                yield delay(env, t.c_recv + chunk / t.recv)

    for c in range(channels):
        env.process(channel(ring.start_s(c, channels)))
    env.run()
    return env.now + ((t.c_recv + chunks[-1] / t.recv) if oneway else 0.0)


def predict_us(op: str, size: int, chunk: int, t: Turns, p2p_channels: int = turns.P2P_CHANNELS) -> float:
    """Us a call on two GPUs: the p2p latency plus the channels' turns (``h200.yaml`` as committed)."""
    from rdusim.hw import collectives as nccl
    from rdusim.hw.gpu import load_gpu_node

    ring = load_gpu_node(ROOT / turns.DOC).gpu.fabric.ring
    part = size / 2
    ch = turns.channels_a_peer(part, p2p_channels, 2, chunk)
    chunks = turns.channel_chunks(part, ch, chunk)
    latency = nccl.ALL_TO_ALL_LATENCY_US["Simple"] * 1e-6
    return (latency + transfer_s(ring, ch, chunks, t, op == "send_oneway")) * 1e6


def compare(paths: list[str]) -> list[str]:
    meas = turns.read_measured(paths)
    htc = fit(meas)
    plain = fit_plain(meas)
    out = [f"HTc (this run's one channel, 2-8 MiB at 128 / 256 / 512 KiB): send {htc.send / 1e9:.1f} GB/s + "
           f"{htc.c_send * 1e6:.2f} us a chunk, receive {htc.recv / 1e9:.1f} GB/s + {htc.c_recv * 1e6:.2f} us",
           f"HT (one channel at 512 KiB, 2-8 MiB): send {plain.send / 1e9:.1f} GB/s, receive {plain.recv / 1e9:.1f} GB/s",
           "", "| variant | op | MiB | measured us | HTc | HT |", "|---|---|---:|---:|---:|---:|"]
    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for (variant, case, op, mib), us in sorted(meas.items()):
        if variant not in PREDICTED or case != "plain":
            continue
        a = predict_us(op, mib * MIB, PREDICTED[variant], htc)
        b = predict_us(op, mib * MIB, PREDICTED[variant], plain)
        ea, eb = groups.setdefault((variant, op), ([], []))
        ea.append(a / us - 1)
        eb.append(b / us - 1)
        out.append(f"| {variant} | {op} | {mib} | {us:.1f} | {a:.1f} ({(a / us - 1) * 100:+.1f}%) | {b:.1f} ({(b / us - 1) * 100:+.1f}%) |")
    out += ["", "| check | variant | op | HTc median / worst | HT median / worst | passed (HTc: <= 6% / 12%) |",
            "|---|---|---|---|---|---|"]
    for (variant, op), (ea, eb) in sorted(groups.items()):
        check = "G3" if op == "all_to_all" else "G2"
        ma, wa = statistics.median(abs(x) for x in ea), max(ea, key=abs)
        mb, wb = statistics.median(abs(x) for x in eb), max(eb, key=abs)
        ok = "yes" if ma <= 0.06 and abs(wa) <= 0.12 else "no"
        out.append(f"| {check} | {variant} | {op} | {ma * 100:.1f}% / {wa * 100:+.1f}% | {mb * 100:.1f}% / {wb * 100:+.1f}% | {ok} |")
    g1 = htc.c_send + htc.c_recv
    out += ["", f"G1 (a fixed cost a chunk, both turns, >= 0.5 us): {g1 * 1e6:.2f} us: {'yes' if g1 >= 0.5e-6 else 'no'}"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", nargs="+", metavar="CSV", required=True)
    args = ap.parse_args(argv)
    print("\n".join(compare(args.compare)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
