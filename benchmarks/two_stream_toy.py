"""What a fused event loop could cost per expert tile: NOT the engine, a cost estimate.

    python benchmarks/two_stream_toy.py

Two compute-bound tile streams (the 128K DeepSeek-R1 prefill's ``moe_up`` and ``moe_down``:
their compute delays and load bytes) share one processor-sharing pool; every event's arithmetic
(serve every flow, land the first, insert an arrival, re-plan, the busy-time sums) runs in one
function with local variables, each item's next load starting at its take. Simplified on
purpose: a pool fast enough (3 TB/s) that no take waits, so no urgent landings, no buffer gate
beyond one item ahead, no other flows, no equal-time ties, no SimPy. benchmarks/RESULTS.md
(p15resim) compares its CPU per item with the engine's.
"""

from __future__ import annotations

import heapq
import math
import time

RATE = 3.0e12                                         # B/s (fast enough that nothing waits)
DELAYS = (1.9544721283956446e-06, 1.9516477467072114e-06)   # s per tile: moe_up, moe_down
LOADS = (1835008.0, 917504.0)                         # bytes per tile


def run(tiles: int = 16384) -> int:   # noqa: C901, PLR0915 (one function on purpose: the point of the toy)
    flows: list[list] = []   # [bytes left, arrival, stream], ascending bytes left
    updated = busy = 0.0
    arrivals = 0
    next_s = math.inf
    taken, started = [1, 1], [2, 2]
    landed = [[True] + [False] * tiles, [True] + [False] * tiles]
    in_flight = [True, True]
    compute_busy, start = [0.0, 0.0], [0.0, 0.0]
    queue: list[tuple] = []

    def add(now: float, stream: int) -> None:
        nonlocal updated, busy, arrivals, next_s
        count = len(flows)
        elapsed = now - updated
        if elapsed > 0 and count:
            served = RATE / count * elapsed
            for flow in flows:
                flow[0] -= served
            busy += elapsed
        updated = now
        flow = [LOADS[stream], arrivals, stream]
        arrivals += 1
        at = count
        while at and flows[at - 1][0] > flow[0]:
            at -= 1
        flows.insert(at, flow)
        next_s = now + flows[0][0] / (RATE / (count + 1))

    for stream in (0, 1):
        add(0.0, stream)
        heapq.heappush(queue, (DELAYS[stream], 1, stream, stream))
    number, items = 2, 0
    while queue:
        now, _, _, stream = heapq.heappop(queue)
        compute_busy[stream] = compute_busy[stream] + now - start[stream]
        items += 1
        while next_s <= now:   # the landings due (lazy)
            at = next_s
            count = len(flows)
            elapsed = at - updated
            if elapsed > 0:
                served = RATE / count * elapsed
                for flow in flows:
                    flow[0] -= served
                busy += elapsed
            updated = at
            flow = flows.pop(0)
            landed[flow[2]][started[flow[2]] - 1] = True
            in_flight[flow[2]] = False
            next_s = at + flows[0][0] / (RATE / (count - 1)) if flows else math.inf
        k = taken[stream]
        if k >= tiles:
            continue
        if not landed[stream][k]:
            raise SystemExit("a take waited: the toy has no urgent landings")
        taken[stream] = k + 1
        if started[stream] < tiles and not in_flight[stream]:
            started[stream] += 1
            in_flight[stream] = True
            add(now, stream)
        start[stream] = now
        heapq.heappush(queue, (now + DELAYS[stream], 1, number, stream))
        number += 1
    return items


def main() -> None:
    best = math.inf
    for _ in range(5):
        cpu = time.process_time()
        items = run()
        best = min(best, time.process_time() - cpu)
    print(f"{items} tiles, {best:.4f} s of CPU (min of 5), {best / items * 1e6:.2f} us per tile")


if __name__ == "__main__":
    main()
