"""measure.py's ``replay_times``, the one CUDA-graph replay timing loop of small_kernels.py and
tp_shard.py, on the CPU with a stand-in graph and CUDA events."""

from __future__ import annotations

import pytest

from .scripts import bench_script


def test_measure_replay_times_warms_up_then_times_each_replay(monkeypatch) -> None:
    """``warmup`` untimed replays, one synchronize (none without a warm-up), then per rep: event,
    replay, event, synchronize; the events' milliseconds come back as seconds."""
    pytest.importorskip("torch")
    measure = bench_script("measure")
    calls: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing

        def record(self) -> None:
            calls.append("record")

        def elapsed_time(self, end: Event) -> float:
            return 2.5  # ms

    class Graph:
        def replay(self) -> None:
            calls.append("replay")

    monkeypatch.setattr(measure.torch.cuda, "Event", Event)
    monkeypatch.setattr(measure.torch.cuda, "synchronize", lambda: calls.append("sync"))
    assert measure.replay_times(Graph(), 4, warmup=3) == [2.5e-3] * 4
    assert calls == ["replay"] * 3 + ["sync"] + ["record", "replay", "record", "sync"] * 4
    calls.clear()  # no warm-up: no synchronize before the first replay (small_kernels' sequence)
    assert measure.replay_times(Graph(), 2, warmup=0) == [2.5e-3] * 2
    assert calls == ["record", "replay", "record", "sync"] * 2


def test_small_kernels_graph_per_call_is_the_median_replay_over_the_calls(monkeypatch) -> None:
    """small_kernels.graph_per_call: one graph of ``calls`` calls (fns cycled), 15 replays timed
    with no warm-up replay, the median replay's seconds / calls."""
    pytest.importorskip("torch")
    sk = bench_script("small_kernels")
    seen: dict = {}
    ran: list[int] = []
    monkeypatch.setattr(sk.M, "capture", lambda ctx, body: body() or "graph")
    monkeypatch.setattr(
        sk.M,
        "replay_times",
        lambda g, reps, warmup: seen.update(g=g, reps=reps, warmup=warmup) or [1.0, 3.0, 2.0],
    )
    assert sk.graph_per_call([lambda: ran.append(0), lambda: ran.append(1)], calls=4) == 0.5
    assert ran == [0, 1, 0, 1]
    assert seen == {"g": "graph", "reps": 15, "warmup": 0}
    assert not hasattr(bench_script("tp_shard"), "_graph_us")
