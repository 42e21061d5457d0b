"""The discrete-event engine: run a plan's fused kernels on SimPy sockets.

Owns: ``simulate_plan`` and the SimPy processes of a kernel (stage loaders, stage
compute, write-back, the kernel barrier). Imports: resources, reuse, trace, mapping.plan, hw.system.

Per socket: one processor-sharing pool per memory tier (HBM, DDR) and one for P2P
egress. A kernel is a spatial pipeline: every stage owns its PCUs; its loader streams the
items' bytes ahead of compute into a bounded buffer; compute waits for the chunk from its
upstream stages, computes item by item, sends its P2P bytes, starts the chunk's
write-back (bounded), and hands the chunk downstream through bounded queues. A kernel
ends when every stage has drained and its writes landed; the sockets then synchronise
and the next kernel pays its launch overhead.

Data-dependent loads (``Stage.loads_follow_inputs``: routed experts picked by a router in the
same kernel): a chunk's loads start only when its inputs arrive, so they neither run ahead
of the router nor prefetch in a looped kernel.

Kernel looping (``kernel_looping: true`` in the mapping; R3 = arXiv 2410.23668, R4 in
../shared/reference/hardware-and-models.md A.6): consecutive calls of the same kernel are one
call with a pipelined outer loop. The loop pays one launch, no synchronisation between
iterations, and an iteration's loaders (its weights) start when the previous iteration
starts, as far ahead as its buffers allow, sharing HBM with it; its compute waits for the
previous iteration's end.

Speculative decoding (``rdusim.model.speculative``): one step is ``k`` steps of the draft's
kernels, then the target's kernels verifying ``k + 1`` tokens per sequence, one after the
other on the same sockets (each kernel ends with the node's barrier, so nothing overlaps).

Fast path: identical layers start from the same drained state, so each layer type is
simulated once and multiplied (a looped type is simulated layer by layer: each iteration
overlaps the next); symmetric sockets run identical plans, so one socket is simulated.
``fast=False`` runs every layer on every socket (tests check both agree).

Coalescing (``coalesce=True``, the default; ``coalesce=False`` is the reference engine, one
event per work item per socket, and tests/sim/test_coalesce.py checks both agree to 1e-9 on
every shipped mapping). Identical work that starts together on equal resources moves as one
event carrying a count; nothing is assumed about overlap or contention:

- sockets: every socket of a plan runs the same kernels on its own pools, and sockets meet only
  at the kernel barrier (a fixed sync time), so the ``fast=False`` path simulates one socket
  standing for all of them (``_Socket.copies``; trace events are written for each socket);
- an item's loads start together and the stage's ``_Feed`` itself waits for them (each load is
  still its own flow in its pool's processor sharing): at most one event when the last lands,
  not one process per load and a condition over them; write-backs are pool events, not processes;
- the loader-to-compute buffer is a counter (``_Feed``) instead of a SimPy store: item ``k``'s
  loads start when item ``k-1``'s have landed and compute has taken item ``k - depth`` (the
  store's capacity rule), and compute waits only for an item whose loads are still in flight;
- lazy landings (no trace recorded): an item's landing is an event only when compute waits for
  it or the next item's gate is open; otherwise its pools land it when next touched, by the
  same arithmetic (``BandwidthPool.catch_up``), and the feed catches its in-flight item up
  before its gate moves; the kernel's records read the pools after catching them up.

Direct scheduling (``DIRECT``, the default; tests compare it with SimPy processes bit for bit): a
chunk's items on compute are callbacks (``_Items``), and an item's compute delay and a pool's
timer are plain entries in SimPy's queue (the runner, the pool) at the time, priority and event
number a ``Timeout`` or timer event would have had, run by the engine's own loop (``_run``).

Kernel calls reused (``reuse=KernelReuse()``, ``rdusim.sim.reuse``; the explorer's re-scores): a
call from a drained node to a drained node whose kernel plan the cache holds at a start the
shift to this one is exact for (the same start, or the same binade and an even multiple of its
spacing, both calls ending ``MARGIN`` spacings below the binade's top) is the kept call shifted
in time, one event; otherwise it is simulated and kept (for shifting only if it ends that far
below its binade's top; else for its own start alone, so such a call is simulated again at each
new start). Its busy times and bytes are the kept call's increments (equal to a fresh
simulation's in all but the last bits).

Equal-time ties: events at the same simulated time run in another order than in the reference
engine; tests/sim/test_coalesce.py checks on tie-laden random pipelines (every duration a
quarter of a second) that the event logs and kernel records still agree bit for bit. With
arbitrary byte counts a pool's ``bytes_total`` may add the same transfers in another order
(float rounding, about 1e-16 relative; hence the 1e-9 tolerance of the general comparisons);
every time is computed from the same sequence of pool states.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from heapq import heappop, heappush

import simpy
from simpy.events import NORMAL, PENDING

from rdusim.config.schema import OFF_CHIP_TIERS
from rdusim.errors import SimulationError
from rdusim.hw.system import System
from rdusim.mapping.plan import KernelPlan, Plan, Stage
from rdusim.sim.resources import EPSILON_BYTES, HORIZON_S, BandwidthPool, delay, past_horizon
from rdusim.sim.reuse import KernelReuse, shifted
from rdusim.sim.trace import KernelRecord, Trace, TraceEvent

#: direct scheduling (the default): a chunk's items on compute as callbacks (``_Items``), item
#: delays and pool timers as plain entries in SimPy's queue, run by the engine's own loop
#: (``_run``); ``False`` runs them as SimPy processes, ``Timeout``s and event timers under
#: ``env.run()``: the same events in the same order (tests/sim/test_coalesce.py compares the two)
DIRECT = True


@dataclass
class _Socket:
    index: int
    pools: dict[str, BandwidthPool]     # HBM, DDR, "p2p"
    p2p_latency_s: float
    copies: int = 1                     # identical sockets it stands for: index, index + 1, ...

    @property
    def indices(self) -> range:
        return range(self.index, self.index + self.copies)


@dataclass
class _InFlight:
    """The kernel call in progress and its stage processes, to say where a deadlock is."""

    kernel: str = ""
    layer_type: str = ""
    layer: int = -1
    stages: dict[str, simpy.Process] = field(default_factory=dict)

    def diagnosis(self) -> str:
        stuck = ", ".join(name for name, process in self.stages.items() if not process.triggered)
        return (f"in kernel {self.kernel!r} ({self.layer_type} layer {self.layer}): stage(s) {stuck} "
                "never finished, waiting for a chunk no stage sends (check each stage's inputs and "
                "chunk counts)")


class _Recorder:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.events: list[TraceEvent] = []
        self.busy: dict[tuple[int, str], float] = {}

    def compute(self, socket: _Socket, stage: str, kernel: str, layer: int, start: float, end: float,
                work: float) -> None:
        key = (socket.index, stage)
        self.busy[key] = self.busy.get(key, 0.0) + end - start
        if self.enabled:
            for index in socket.indices:
                self.events.append(TraceEvent(index, f"compute:{stage}", stage, kernel, layer, start, end, 0.0, work))

    def transfer(self, socket: _Socket, track: str, name: str, kernel: str, layer: int, start: float, end: float,
                 nbytes: float) -> None:
        if self.enabled:
            for index in socket.indices:
                self.events.append(TraceEvent(index, track, name, kernel, layer, start, end, nbytes))


def simulate_plan(plan: Plan, *, fast: bool = True, record_events: bool = True,
                  layer_types: tuple[str, ...] | None = None, coalesce: bool = True, start_s: float = 0.0,
                  reuse: KernelReuse | None = None) -> Trace:
    """Simulate one forward pass (prefill) or one decode step of ``plan``.

    ``layer_types`` restricts the run to some layer types (calibration needs only one).
    ``coalesce=False`` runs the reference engine (one event per item per socket). ``start_s``
    starts the clock there (a layer type simulated on its own at the time it starts in the
    whole run: the node is drained and synchronised then, so its times come out bit for bit).
    ``reuse``: kernel calls from a drained node to a drained node are taken from it when it holds
    a call of the same kernel on the same node that shifts exactly to their start, and kept in it
    otherwise (``rdusim.sim.reuse``: the times bit for bit; the busy times and bytes are the
    first call's; fewer events); only without a trace and on one simulated socket.
    """
    env = simpy.Environment(initial_time=start_s)
    n_sockets = 1 if fast else plan.system.sockets  # every socket of a plan runs the same kernels
    copies = n_sockets if coalesce else 1
    sockets = [_make_socket(env, plan, s, copies) for s in range(0, n_sockets, copies)]
    recorder = _Recorder(record_events)
    records: list[KernelRecord] = []
    segments = [(p, [x for x in layers if layer_types is None or x[1] in layer_types])
                for p, layers in _segments(plan, fast)]
    in_flight = _InFlight()
    if record_events or len(sockets) > 1:
        reuse = None
    main = env.process(_run_segments(env, segments, sockets, recorder, records, in_flight, coalesce, reuse))
    try:
        if DIRECT:
            _run(env)
        else:
            env.run()
    except SimulationError as error:  # past the horizon: the hardware's numbers are the cause
        raise SimulationError(f"{plan.system.source}: simulating {plan.mapping.name}: {error}") from None
    if not main.triggered:
        raise SimulationError(f"{plan.mapping.name}: the simulation deadlocked at t={env.now:.6g} s "
                              f"{in_flight.diagnosis()}; {len(records)} kernel call(s) completed before it")
    return Trace(
        kernels=tuple(records), events=tuple(recorder.events), sockets_simulated=n_sockets,
        layers_simulated=sum(len(layers) for _, layers in segments),
        event_count=next(env._eid),  # SimPy's own event counter
        layer_multiplier={layer: mult for _, layers in segments for layer, _, mult in layers},
    )


def _run(env: simpy.Environment) -> None:
    """``env.run()``: SimPy's ``step`` until the queue is empty, its loop inline (the same events
    in the same order; a failed event nobody defused raises as ``step`` raises it)."""
    queue = env._queue   # noqa: SLF001
    while queue:
        env._now, _, number, event = heappop(queue)   # noqa: SLF001
        kind = event.__class__
        if kind is _Items:   # an item's compute delay: the stage's items go on
            event.computed()
            continue
        if kind is BandwidthPool:   # a pool's timer
            event.on_timer(number)
            continue
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):   # noqa: SLF001
            exc = type(event._value)(*event._value.args)   # noqa: SLF001
            exc.__cause__ = event._value   # noqa: SLF001
            raise exc


def _segments(plan: Plan, fast: bool) -> list[tuple[Plan, list[tuple[int, str, int]]]]:
    """What one step runs, in order: a plain step is the plan's layers; a speculative step is
    ``k`` steps of the draft's layers, then the target's verification. A draft step's layers are
    numbered after the target's (step i: from ``target layers + i x draft layers``)."""
    target = _layer_sequence(plan, fast)
    sd = plan.speculative
    if sd is None or sd.draft is None:
        return [(plan, target)]
    start, width = sum(plan.layer_counts.values()), sum(sd.draft.layer_counts.values())
    drafts = [(sd.draft, [(start + i * width + layer, t, n) for layer, t, n in _layer_sequence(sd.draft, fast)])
              for i in range(sd.k)]
    return [*drafts, (plan, target)]


def _run_segments(env: simpy.Environment, segments: list[tuple[Plan, list[tuple[int, str, int]]]],
                  sockets: list[_Socket], recorder: _Recorder, records: list[KernelRecord],
                  in_flight: _InFlight, coalesce: bool, reuse: KernelReuse | None) -> Generator:
    for plan, layers in segments:
        yield from _run_layers(env, plan, layers, sockets, recorder, records, in_flight, coalesce, reuse)


def _make_socket(env: simpy.Environment, plan: Plan, index: int, copies: int) -> _Socket:
    socket = plan.system.socket
    pools = {tier: BandwidthPool(env, f"{tier}{index}", socket.tier_bytes_per_s(tier), direct=DIRECT)
             for tier in OFF_CHIP_TIERS}
    pools["p2p"] = BandwidthPool(env, f"p2p{index}", socket.p2p_bytes_per_s, direct=DIRECT)
    return _Socket(index, pools, socket.p2p_latency_s, copies)


def _layer_sequence(plan: Plan, fast: bool) -> list[tuple[int, str, int]]:
    """(first layer index, layer type, how many layers it stands for)."""
    sequence, start = [], 0
    for layer_type, count in plan.layer_counts.items():
        if fast and not _looped(plan, layer_type):
            sequence.append((start, layer_type, count))
        else:
            sequence += [(start + i, layer_type, 1) for i in range(count)]
        start += count
    return sequence


def _looped(plan: Plan, layer_type: str) -> bool:
    """Whether consecutive layers of this type are one looped kernel call (one kernel per layer)."""
    return plan.mapping.defaults.kernel_looping and len(plan.kernels[layer_type]) == 1


def _run_layers(env: simpy.Environment, plan: Plan, layers: list[tuple[int, str, int]],
                sockets: list[_Socket], recorder: _Recorder, records: list[KernelRecord],
                in_flight: _InFlight, coalesce: bool, reuse: KernelReuse | None = None) -> Generator:
    system = plan.system
    calls = [(layer, layer_type, kernel) for layer, layer_type, _ in layers for kernel in plan.kernels[layer_type]]
    started: _Started | None = None  # a looped iteration, already loading
    for index, (layer, layer_type, kernel) in enumerate(calls):
        start = env.now
        _catch_up(sockets[0])
        following = calls[index + 1] if index + 1 < len(calls) else None
        looping = following is not None and following[1] == layer_type and _looped(plan, layer_type)
        # a call from a drained node to a drained node (no looped iteration loading before or during
        # it) is its plan, the node and its start time: ``reuse`` may hold it
        node = _node(system, kernel, sockets[0], coalesce) if reuse is not None and started is None and not looping \
            else None
        if node is not None and reuse is not None and (found := reuse.find(node, kernel, start)) is not None:
            record, end = found
            yield _at(env, end)
            _add_totals(sockets[0], recorder, record)
            records.append(shifted(record, layer, start, end))
            continue
        before = {k: (p.busy_s, p.bytes_total) for k, p in sockets[0].pools.items()}
        busy_before = dict(recorder.busy)
        launch_sync_s = 0.0
        if started is None:
            launch_sync_s = system.socket.launch_s(kernel.orchestration)
            yield delay(env, launch_sync_s)
            started = _start(env, kernel, sockets, recorder, layer, env.event().succeed(), coalesce)
        runs, stages = started
        in_flight.kernel, in_flight.layer_type, in_flight.layer, in_flight.stages = kernel.name, layer_type, layer, stages
        done = env.all_of(runs)
        # the next iteration's loaders start now (bounded by its buffers); its compute waits for this one
        started = _start(env, following[2], sockets, recorder, following[0], done, coalesce) \
            if looping and following is not None else None
        yield done
        if not looping:
            yield delay(env, system.sync_s)
            launch_sync_s += system.sync_s
        _catch_up(sockets[0])
        records.append(_record(kernel, layer, start, env.now, launch_sync_s, sockets[0], before, recorder, busy_before))
        if node is not None and reuse is not None:
            reuse.keep(node, kernel, records[-1])


def _node(system: System, kernel: KernelPlan, socket: _Socket, coalesce: bool) -> tuple:
    """What a kernel call's simulation depends on besides its plan and start time: the socket's
    pool rates and P2P latency, the call's launch and the barrier's sync, and the engine."""
    return (tuple((name, pool.rate_bytes_per_s) for name, pool in socket.pools.items()), socket.p2p_latency_s,
            socket.copies, system.socket.launch_s(kernel.orchestration), system.sync_s, coalesce, DIRECT)


def _at(env: simpy.Environment, time: float) -> simpy.Event:
    """An event at ``time`` exactly (SimPy's own schedule at an absolute time, as a pool's timer)."""
    event = _triggered(env)
    heappush(env._queue, (time, NORMAL, next(env._eid), event))   # noqa: SLF001
    return event


def _add_totals(socket: _Socket, recorder: _Recorder, record: KernelRecord) -> None:
    """A reused call's busy times and bytes onto the node's running totals."""
    busy = recorder.busy
    for stage, busy_s in record.stage_busy_s.items():
        key = (socket.index, stage)
        busy[key] = busy.get(key, 0.0) + busy_s
    for name, pool in socket.pools.items():
        pool.busy_s += record.pool_busy_s[name]
        pool.bytes_total += record.pool_bytes[name]


def _catch_up(socket: _Socket) -> None:
    """Land what is due by now in every pool (landings no timer was armed for), before reading them."""
    for pool in socket.pools.values():
        pool.catch_up()


#: a kernel call's stage processes on every socket, and its stages by name (for diagnoses)
_Started = tuple[list[simpy.Process], dict[str, simpy.Process]]


def _start(env: simpy.Environment, kernel: KernelPlan, sockets: list[_Socket], recorder: _Recorder, layer: int,
           go: simpy.Event, coalesce: bool) -> _Started:
    stages: dict[str, simpy.Process] = {}
    return [env.process(_run_kernel(env, kernel, s, recorder, layer, go, stages, coalesce)) for s in sockets], stages


def _record(kernel: KernelPlan, layer: int, start: float, end: float, launch_sync_s: float, socket: _Socket,
            before: dict[str, tuple[float, float]], recorder: _Recorder,
            busy_before: dict[tuple[int, str], float]) -> KernelRecord:
    stage_busy = {s.name: recorder.busy.get((0, s.name), 0.0) - busy_before.get((0, s.name), 0.0)
                  for s in kernel.stages if s.pcus}
    return KernelRecord(
        kernel=kernel.name, layer_type=kernel.layer_type, layer=layer, start_s=start, end_s=end,
        launch_sync_s=launch_sync_s, stage_busy_s=stage_busy, stage_pcus={s.name: s.pcus for s in kernel.stages if s.pcus},
        pool_busy_s={k: p.busy_s - before[k][0] for k, p in socket.pools.items()},
        pool_bytes={k: p.bytes_total - before[k][1] for k, p in socket.pools.items()},
    )


def _run_kernel(env: simpy.Environment, kernel: KernelPlan, socket: _Socket, recorder: _Recorder,
                layer: int, go: simpy.Event, processes: dict[str, simpy.Process], coalesce: bool) -> Generator:
    """Every stage's loader starts at once; its compute waits for ``go`` (a looped iteration:
    the previous iteration's end)."""
    queues = {(src, stage.name): simpy.Store(env, capacity=kernel.buffer_depth)
              for stage in kernel.stages for src in stage.inputs}
    runs = []
    for stage in kernel.stages:
        inputs = [queues[(src, stage.name)] for src in stage.inputs]
        outputs = [q for (src, _), q in queues.items() if src == stage.name]
        if coalesce:
            feed = _Feed(env, kernel, stage, socket, recorder, layer, lazy=not recorder.enabled)
            runs.append(env.process(_run_stage_coalesced(env, kernel, stage, inputs, outputs, feed, go, socket,
                                                         recorder, layer)))
        else:
            ready = simpy.Store(env, capacity=kernel.buffer_depth)
            arrived = simpy.Store(env) if stage.loads_follow_inputs else None
            env.process(_load(env, kernel, stage, ready, socket, recorder, layer, arrived))
            runs.append(env.process(_run_stage(env, kernel, stage, inputs, outputs, ready, go, socket, recorder,
                                               layer, arrived)))
        processes[stage.name] = runs[-1]
    yield env.all_of(runs)


# ------------------------------------------------------------------------ reference engine (coalesce=False)
def _run_stage(env: simpy.Environment, kernel: KernelPlan, stage: Stage, inputs: list[simpy.Store],
               outputs: list[simpy.Store], ready: simpy.Store, go: simpy.Event, socket: _Socket,
               recorder: _Recorder, layer: int, arrived: simpy.Store | None = None) -> Generator:
    yield go
    writes: deque[simpy.Event] = deque()
    for index, chunk in enumerate(stage.chunks):
        yield from _await_inputs(stage, index, inputs)
        if arrived is not None:  # the chunk's inputs say what to load: its loader may start
            yield arrived.put(index)
        for item in chunk.items:
            yield ready.get()
            if item.work > 0 and stage.rate_ops_per_s > 0:
                start = env.now
                yield delay(env, item.work / stage.rate_ops_per_s)
                recorder.compute(socket, stage.name, kernel.name, layer, start, env.now, item.work)
        if chunk.p2p_bytes > 0:
            yield from _send(env, kernel, stage, chunk.p2p_bytes, chunk.p2p_steps, socket, recorder, layer)
        for tier, nbytes in chunk.stores:
            writes.append(env.process(_transfer(env, socket, tier, nbytes, kernel, f"{stage.name}:write", recorder, layer)))
        while len(writes) > kernel.buffer_depth:
            yield writes.popleft()
        for queue in outputs:
            yield queue.put(index)
    if writes:
        yield env.all_of(list(writes))


def _await_inputs(stage: Stage, index: int, inputs: list[simpy.Store]) -> Generator:
    """Wait for chunk ``index`` from every upstream stage (a barrier: every chunk before the first)."""
    arrivals = 1
    if stage.is_barrier:  # every input chunk before the first computes, none after
        arrivals = len(stage.chunks) if index == 0 else 0
    for queue in inputs:
        for _ in range(arrivals):
            yield queue.get()


def _load(env: simpy.Environment, kernel: KernelPlan, stage: Stage, ready: simpy.Store, socket: _Socket,
          recorder: _Recorder, layer: int, arrived: simpy.Store | None = None) -> Generator:
    """Stream the stage's items ahead of compute (bounded by ``ready``); with ``arrived``
    (data-dependent loads), a chunk's loads start only once its inputs have arrived."""
    for chunk in stage.chunks:
        if arrived is not None:
            yield arrived.get()
        for item in chunk.items:
            loads = [env.process(_transfer(env, socket, tier, nbytes, kernel, f"{stage.name}:read", recorder, layer))
                     for tier, nbytes in item.loads if nbytes > 0]
            if loads:
                yield env.all_of(loads)
            yield ready.put(item)


def _transfer(env: simpy.Environment, socket: _Socket, tier: str, nbytes: float, kernel: KernelPlan, name: str,
              recorder: _Recorder, layer: int) -> Generator:
    start = env.now
    yield socket.pools[tier].transfer(nbytes)
    recorder.transfer(socket, tier, name, kernel.name, layer, start, env.now, nbytes)


def _send(env: simpy.Environment, kernel: KernelPlan, stage: Stage, nbytes: float, steps: int, socket: _Socket,
          recorder: _Recorder, layer: int) -> Generator:
    """P2P egress of one chunk of a collective: setup latency per step, then the bytes."""
    start = env.now
    yield delay(env, steps * socket.p2p_latency_s)
    yield socket.pools["p2p"].transfer(nbytes)
    recorder.transfer(socket, "p2p", stage.name, kernel.name, layer, start, env.now, nbytes)


# ------------------------------------------------------------------------ coalesced engine (the default)
class _Feed:
    """A stage's loader as a counter, not a process: item ``k``'s loads start together when item
    ``k - 1``'s have landed and compute has taken item ``k - depth``; the same rule as the
    reference engine's loader putting into a store of capacity ``depth``. So one item at most
    is in flight, and the feed itself waits for its loads (each its own flow in its pool): no
    event per load and no condition over them.

    With ``lazy`` (no trace recorded), an item's landing is an event only when something reacts
    to it at that instant: compute waiting for the item, or the next item's loads (the gate
    above is open for them). Otherwise the pools land it when next touched, and the feed
    catches its in-flight item up (``_settle``) before the gate moves (a take, a release)."""

    def __init__(self, env: simpy.Environment, kernel: KernelPlan, stage: Stage, socket: _Socket,
                 recorder: _Recorder, layer: int, lazy: bool) -> None:
        self.env, self.kernel, self.stage, self.socket, self.recorder, self.layer = \
            env, kernel, stage, socket, recorder, layer
        self.lazy = lazy
        self.pools = socket.pools
        self.depth = kernel.buffer_depth
        self.items = [item for chunk in stage.chunks for item in chunk.items]
        self.landed = [False] * len(self.items)
        self.started = 0     # items whose loads have started
        self.taken = 0       # items compute has taken
        # items whose loads may start: all of them, unless loads follow inputs (data-dependent
        # loads: a chunk's items are released when its inputs arrive, as in the reference loader)
        self.released = 0 if stage.loads_follow_inputs else len(self.items)
        # the item in flight (started last, not landed): its loads' (pool, flow), how many are
        # still in flight, the event of its landing (urgent) or None (lazy), trace records
        self.flows: list[tuple[BandwidthPool, list]] = []
        self.left = 0
        self.event: simpy.Event | None = None
        self.on_landed: Callable[[int, float], None] | None = None
        # each item's loads as (pool, bytes); ``_one``: the load of an item of one (a flow), when
        # no trace is recorded (``take`` starts those inline)
        self._loads: list[list[tuple[BandwidthPool, float]]] = []
        self._one: list[tuple[BandwidthPool, float] | None] = []
        resolved: dict[int, tuple[list, list]] = {}   # by the chunk's items' id (plans share them)
        for chunk in stage.chunks:
            got = resolved.get(id(chunk.items))
            if got is None:
                loads = [[(self.pools[tier], nbytes) for tier, nbytes in item.loads if nbytes > 0]
                         for item in chunk.items]
                got = resolved[id(chunk.items)] = (loads, [x[0] if len(x) == 1 and x[0][1] > EPSILON_BYTES and lazy
                                                           else None for x in loads])
            self._loads += got[0]
            self._one += got[1]
        self._pump()

    def _pump(self) -> None:
        items, depth, landed = self.items, self.depth, self.landed
        while self.started < len(items):
            k = self.started
            released, taken = self.released, self.taken
            if k >= released or taken < k - depth:   # the gate is shut for item k
                return
            if k > 0 and not landed[k - 1]:   # item k - 1 in flight: its landing starts item k
                if self.left:
                    self._urgent()
                return   # (else its landing's event is on its way)
            self.started = k + 1
            # urgent: the gate is open for item k + 1, so this landing starts it
            urgent = not self.lazy or (k + 1 < released and taken >= k + 1 - depth)
            one = self._one[k]
            if one is not None:   # the common case (one load, a flow, no trace): the feed is the flow's waiter
                pool, nbytes = one
                self.left, self.event = 1, None
                if urgent:
                    self.event = _pending(self.env, self._landed)
                flow = pool.add(nbytes, self, urgent)
                if self.left:
                    self.flows = [(pool, flow)]
                    return
                if self.event is not None:
                    return
            elif self._start(self._loads[k], urgent):
                return
            landed[k] = True   # nothing to load, or landed at once

    def _start(self, loads: list[tuple[BandwidthPool, float]], urgent: bool) -> bool:
        """Start the next item's loads; whether they are in flight."""
        if self.recorder.enabled:
            self.on_landed = self._recording(loads)
        self.flows, self.left, self.event = [], len(loads), None
        if urgent and loads:
            self.event = _pending(self.env, self._landed)
        if len(loads) == 1:   # the feed is the flow's waiter
            pool, nbytes = loads[0]
            flow = pool.add(nbytes, self, urgent)
            if flow is None:
                self.part_landed(0)
            elif self.left:
                self.flows.append((pool, flow))
        else:
            for index, (pool, nbytes) in enumerate(loads):
                flow = pool.add(nbytes, _Load(self, index), urgent)
                if flow is None:
                    self.part_landed(index)
                elif self.left:
                    self.flows.append((pool, flow))
        return self.left > 0 or self.event is not None

    def succeed(self) -> None:
        """The pool's call when the in-flight item's one load lands."""
        if self.on_landed is None and self.left == 1 and self.event is None:   # ``part_landed``'s common case
            self.left = 0
            self.flows = []
            self.landed[self.started - 1] = True
        else:
            self.part_landed(0)

    def part_landed(self, index: int) -> None:
        if self.on_landed is not None:
            self.on_landed(index, self.env._now)   # noqa: SLF001 (recorded: urgent, a timer's time)
        self.left -= 1
        if self.left == 0:
            self.flows = []
            if self.event is not None:
                _succeed(self.event)   # its callback: ``_landed``
            else:   # found by a pool's catch-up: nothing started at its instant
                self.landed[self.started - 1] = True

    def _urgent(self) -> simpy.Event:
        """The in-flight item's landing as an event (its pools wake at its exact time)."""
        if self.event is None:
            self.event = _pending(self.env, self._landed)
            for pool, flow in self.flows:
                pool.make_urgent(flow)
        return self.event

    def _settle(self) -> None:
        """Land the in-flight item's loads that are due by now (before the gate moves)."""
        for pool, _ in self.flows:
            pool.catch_up()

    def _recording(self, loads: list[tuple[BandwidthPool, float]]) -> Callable[[int, float], None]:
        start, name = self.env.now, f"{self.stage.name}:read"
        tiers = {id(pool): tier for tier, pool in self.socket.pools.items()}

        def record(index: int, end: float) -> None:
            pool, nbytes = loads[index]
            self.recorder.transfer(self.socket, tiers[id(pool)], name, self.kernel.name, self.layer, start, end,
                                   nbytes)
        return record

    def _landed(self, _event: simpy.Event) -> None:
        """The in-flight item's loads landed (its event): the next item may start."""
        self.landed[self.started - 1] = True
        self.event = None
        self._pump()

    def release(self, count: int) -> None:
        """A chunk's inputs arrived: its ``count`` items may load (``Stage.loads_follow_inputs``)."""
        self._settle()
        self.released += count
        self._pump()

    def take(self) -> simpy.Event | None:
        """Compute takes the next item: ``None`` if its loads have landed (taken), else the event
        of their landing, after which compute calls ``take`` again."""
        flows = self.flows
        if flows:
            now = self.env._now   # noqa: SLF001
            for pool, _ in flows:   # ``_settle`` (the pools' ``catch_up``, inline)
                while pool._next_s <= now:   # noqa: SLF001
                    pool._land_next()   # noqa: SLF001
        k = self.taken
        landed = self.landed
        if not landed[k]:
            if self.started <= k:  # cannot happen: item k starts when item k - 1 lands
                raise SimulationError(f"{self.stage.name}: item {k} taken before its loads started")
            return self._urgent()
        self.taken = taken = k + 1
        # ``_pump``'s common case inline: the gate opens for the next item, the item before it has
        # landed, and it is one flow
        s = self.started
        released, depth = self.released, self.depth
        if s < released and taken >= s - depth and landed[s - 1] and (one := self._one[s]) is not None:
            self.started = s + 1
            pool, nbytes = one
            self.left, self.event = 1, None
            if s + 1 < released and taken >= s + 1 - depth:   # urgent: its landing starts the next
                self.event = _pending(self.env, self._landed)
                flow = pool.add(nbytes, self, True)
            else:
                flow = pool.add(nbytes, self, False)
            if self.left:
                self.flows = [(pool, flow)]
                return None   # (``_pump`` would stop at item s + 1: item s is in flight)
            if self.event is not None:
                return None
            landed[s] = True   # landed at once
        self._pump()
        return None


class _Load:
    """One load of an item of several: its landing counts the feed's in-flight item down."""

    __slots__ = ("feed", "index")

    def __init__(self, feed: _Feed, index: int) -> None:
        self.feed, self.index = feed, index

    def succeed(self) -> None:
        self.feed.part_landed(self.index)


def _run_stage_coalesced(env: simpy.Environment, kernel: KernelPlan, stage: Stage, inputs: list[simpy.Store],
                         outputs: list[simpy.Store], feed: _Feed, go: simpy.Event, socket: _Socket,
                         recorder: _Recorder, layer: int) -> Generator:
    """``_run_stage`` with the loader as a ``_Feed``, a chunk's items on compute as callbacks
    (``_Items``) and write-backs as pool events."""
    runner = _Items(env, kernel, stage, feed, socket, recorder, layer) if DIRECT and stage.rate_ops_per_s > 0 else None
    yield go
    writes: deque[simpy.Event] = deque()
    for index, chunk in enumerate(stage.chunks):
        yield from _await_inputs(stage, index, inputs)
        if stage.loads_follow_inputs:  # the chunk's inputs say what to load
            feed.release(len(chunk.items))
        if runner is not None and chunk.items and chunk.items[-1].work > 0:
            yield runner.run(chunk.items)   # the same takes and compute delays, as callbacks
        else:
            for item in chunk.items:
                landing = feed.take()
                if landing is not None:
                    yield landing
                    feed.take()
                if item.work > 0 and stage.rate_ops_per_s > 0:
                    start = env.now
                    yield delay(env, item.work / stage.rate_ops_per_s)
                    recorder.compute(socket, stage.name, kernel.name, layer, start, env.now, item.work)
        if chunk.p2p_bytes > 0:
            yield from _send(env, kernel, stage, chunk.p2p_bytes, chunk.p2p_steps, socket, recorder, layer)
        for tier, nbytes in chunk.stores:
            writes.append(_write(env, socket, tier, nbytes, kernel, f"{stage.name}:write", recorder, layer))
        while len(writes) > kernel.buffer_depth:
            yield writes.popleft()
        for queue in outputs:
            yield queue.put(index)
    if writes:
        yield env.all_of(list(writes))


class _Items:
    """A chunk's items on a stage's compute, driven by callbacks instead of the stage's process:
    item by item, take it from the feed (waiting for its landing if it is in flight), then
    compute it for ``work / rate``. The same takes, at the same times, and the same compute
    delays, scheduled where ``delay`` would schedule them (SimPy's queue, the same time, priority
    and event number, so equal-time ties fall in the same order), without a process resumption,
    a generator step and a new ``Timeout`` per item. The chunk's last item computes in the event
    ``run`` returns (the stage's process waits for it), so the process resumes exactly where the
    item-by-item loop would. The other items' delays are the runner itself in SimPy's queue (no
    event object: ``_run`` calls ``computed``), so only ``_run`` may run the environment."""

    __slots__ = ("env", "feed", "rate", "recorder", "socket", "stage", "kernel", "layer", "key", "items", "count",
                 "index", "start", "done", "delays")

    def __init__(self, env: simpy.Environment, kernel: KernelPlan, stage: Stage, feed: _Feed, socket: _Socket,
                 recorder: _Recorder, layer: int) -> None:
        self.env, self.kernel, self.stage, self.feed, self.socket, self.recorder, self.layer = \
            env, kernel, stage, feed, socket, recorder, layer
        self.rate = stage.rate_ops_per_s
        self.key = (socket.index, stage.name)
        self.items: tuple = ()
        self.count = 0   # len(items)
        self.index = 0
        self.start = 0.0
        self.done = _triggered(env)
        self.delays: dict[float, float] = {}   # work -> work / rate (the same quotient every time)

    def run(self, items: tuple) -> simpy.Event:
        """Start ``items`` (the last has work); the event fires when the last is computed."""
        self.items, self.count, self.index = items, len(items), 0
        self.done = _triggered(self.env)
        self.done.callbacks.append(self._computed)
        self._take()
        return self.done

    def _take(self) -> None:
        landing = self.feed.take()
        if landing is None:
            self._compute()
        else:
            landing.callbacks.append(self._landed)

    def _landed(self, _event: simpy.Event) -> None:
        self.feed.take()
        self._compute()

    def _compute(self) -> None:
        """Compute the taken item (the next with work; taking those without in passing)."""
        items = self.items
        while True:
            work = items[self.index].work
            self.index += 1
            if work > 0:
                env = self.env
                now = env._now   # noqa: SLF001 (env.now without the property call)
                end = now + self._delay(work)   # what ``delay`` schedules
                if not end <= HORIZON_S:
                    raise past_horizon(end)
                self.start = now
                event = self.done if self.index == len(items) else self
                heappush(env._queue, (end, NORMAL, next(env._eid), event))   # noqa: SLF001
                return
            landing = self.feed.take()
            if landing is not None:
                landing.callbacks.append(self._landed)
                return

    def _computed(self, _event: simpy.Event) -> None:
        self.computed()

    def computed(self) -> None:
        """An item's compute delay ended (``_run``'s call; the last item's: its event's callback)."""
        end = self.env._now   # noqa: SLF001
        recorder = self.recorder
        if recorder.enabled:
            recorder.compute(self.socket, self.stage.name, self.kernel.name, self.layer, self.start, end,
                             self.items[self.index - 1].work)
        else:   # ``recorder.compute``'s sum, the same operations
            busy = recorder.busy
            busy[self.key] = busy.get(self.key, 0.0) + end - self.start
        index = self.index
        if index < self.count:
            landing = self.feed.take()   # ``_take``
            if landing is not None:
                landing.callbacks.append(self._landed)
                return
            work = self.items[index].work
            if work > 0 and index + 1 < self.count:   # ``_compute``'s common case inline
                env = self.env
                end_next = end + (self.delays.get(work) or self._delay(work))
                if not end_next <= HORIZON_S:
                    raise past_horizon(end_next)
                self.index = index + 1
                self.start = end
                heappush(env._queue, (end_next, NORMAL, next(env._eid), self))   # noqa: SLF001
            else:
                self._compute()

    def _delay(self, work: float) -> float:
        delay = self.delays.get(work)
        if delay is None:
            delay = self.delays[work] = work / self.rate
        return delay


def _pending(env: simpy.Environment, callback: Callable[[simpy.Event], None]) -> simpy.Event:
    """``env.event()`` with ``callback``: direct, the object's two attributes set without the
    bound class's and ``__init__``'s calls (its value is ``Event``'s class default: pending)."""
    if not DIRECT:
        event = env.event()
        event.callbacks.append(callback)
        return event
    event = _new_event(simpy.Event)
    event.env, event.callbacks = env, [callback]
    return event


def _succeed(event: simpy.Event) -> None:
    """``event.succeed()``: direct, scheduled as ``Environment.schedule`` schedules it (now, normal
    priority, the next event number) without the two calls."""
    if not DIRECT:
        event.succeed()
        return
    if event._value is not PENDING:   # noqa: SLF001
        raise SimulationError(f"{event} has already been triggered")
    event._ok, event._value = True, None   # noqa: SLF001
    env = event.env
    heappush(env._queue, (env._now, NORMAL, next(env._eid), event))   # noqa: SLF001


_new_event = object.__new__


def _triggered(env: simpy.Environment) -> simpy.Event:
    """An event that succeeds when processed (a ``Timeout``'s state), to schedule by hand."""
    event = simpy.Event(env)
    event._ok, event._value = True, None   # noqa: SLF001
    return event


def _write(env: simpy.Environment, socket: _Socket, tier: str, nbytes: float, kernel: KernelPlan, name: str,
           recorder: _Recorder, layer: int) -> simpy.Event:
    """A write-back as the pool's own event (the reference engine wraps it in a process)."""
    start = env.now
    event = socket.pools[tier].transfer(nbytes)
    if recorder.enabled:
        event.callbacks.append(lambda _event: recorder.transfer(socket, tier, name, kernel.name, layer, start,
                                                                env.now, nbytes))
    return event
