"""The request-level engine: requests through prefill, KV transfer and continuously batched decode.

Owns: ``ServingModel`` (what the engine needs to know of a deployment, as plain data and
step-time functions), ``PrefillTable`` / ``DecodeTable`` (interpolated step times),
``simulate_serving``, its result ``ServingRun`` and the ``ServingSink`` it can hand its records
to as they settle (a request's when it finishes or is rejected, decode steps in start order a
chunk at a time: memory follows the requests in flight). Imports: simpy, numpy, resources, errors.

This is the second discrete-event layer of rdusim, above the kernel simulator: events per
arrival, prefill and KV transfer, and per block of decode steps between two disturbances of a
decode node (``decode_block``; ``coalesce=False``: one per step), never per kernel. Step times come in as functions
(``ServingModel.prefill_time``, ``ServingModel.decode_step_time``); ``rdusim.analysis.serving.deployment``
builds them by running the kernel simulator, tests pass closed forms. Semantics:

- **Arrival.** A request whose prompt exceeds ``max_context``, or whose final KV cache can
  never fit one decode socket's free HBM, is rejected at once with the reason. Otherwise it
  joins the prefill queue with the least outstanding work (ties: lowest index).
- **Prefill** runs one prompt at a time (batch 1) in queue order (FCFS, or shortest prompt
  first). Its end is the first token (TTFT). A one-token request is done there.
- **Transfer** (disaggregated): the prefill node ships the kept KV cache to the decode node
  with the fewest committed requests: ``latency`` then the bytes through the decode node's
  ingress, shared by processor sharing among concurrent transfers. The prefill node starts
  its next prompt meanwhile (the outgoing cache waits in its HBM).
- **Decode** nodes run steps back to back. At each step boundary they admit waiting requests
  in arrival order while the head fits: a request reserves its final KV footprint on the DP
  group (the sockets holding its cache) with the fewest requests that has room, so HBM is
  never exceeded and nothing is preempted. The step runs the smallest compiled batch
  bucket that holds the groups' largest share, at the active requests' mean KV length;
  each step accepts ``accepted_tokens_per_step`` tokens per request (multi-token
  prediction); a request retires after ``ceil((output - 1) / accepted)`` steps.
- **Speculative decoding** (``draft_tokens`` k > 0): each step delivers to each request a
  burst of 1 to k + 1 tokens, drawn token by token with the acceptance rate
  (``rdusim.model.speculative.draw_accepted``) from a generator seeded by (``seed``, request),
  so a request's bursts do not depend on what else runs; its last burst is cut at its output
  length, and it retires after the step that completes it. The mean KV length the step time
  is read at grows by the expected burst (``accepted_tokens_per_step``). Each step records
  the tokens it delivered (``steps["tokens"]``); the inter-token latency ``itl_s`` is the gap
  between deliveries to a request (a burst is one delivery, as a streaming client sees it).
- **Co-located** nodes also hold a prefill queue: between two decode steps a waiting
  prompt is prefilled whole (decode stalls), or, with ``chunk_tokens``, one chunk rides
  along with every decode step (the step lasts decode + chunk).
"""

from __future__ import annotations

import array
import bisect
import functools
import heapq
import itertools
import math
import operator
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import simpy
from simpy.events import NORMAL, URGENT

from rdusim.errors import SimulationError
from rdusim.model.speculative import draw_accepted, expected_accepted
from rdusim.sim.resources import BandwidthPool

#: most steps one coalesced decode block runs through retirements (bounds its lists; the numbers
#: do not depend on it)
BLOCK_STEPS = 4096
#: a growing cache's segment of at least this many steps reads the decode table as a vector
VECTOR_STEPS = 16
#: decode steps held before those that can no longer be preceded go to the sink, in start order
STEP_CHUNK = 1 << 16

# ------------------------------------------------------------------------ step-time tables


@dataclass(frozen=True)
class PrefillTable:
    """Prefill time of one prompt, piecewise power law between simulated prompt lengths.

    Between two grid points ``t(n) = t0 (n / n0) ** k`` with ``k`` from the two points
    (attention is quadratic and the projections linear in the prompt, so log-log is close
    to straight); beyond the ends the nearest segment is extended.
    """

    tokens: tuple[int, ...]
    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) < 2 or len(self.tokens) != len(self.seconds):
            raise ValueError("a prefill table needs at least two (tokens, seconds) points")

    def __call__(self, prompt_tokens: float) -> float:
        x = math.log(max(prompt_tokens, 1.0))
        i = min(max(bisect.bisect_right(self.tokens, prompt_tokens) - 1, 0), len(self.tokens) - 2)
        x0, x1 = math.log(self.tokens[i]), math.log(self.tokens[i + 1])
        y0, y1 = math.log(self.seconds[i]), math.log(self.seconds[i + 1])
        return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


@dataclass(frozen=True)
class DecodeTable:
    """Decode step time at a compiled batch bucket and a KV length, linear in the KV length.

    Each bucket is simulated at the KV lengths of ``kv_tokens``; a step's time is linear
    between them (a decode step is weight streaming, constant in the KV length, plus
    attention, linear in it), extended linearly beyond the ends.
    """

    buckets: tuple[int, ...]
    kv_tokens: tuple[int, ...]
    seconds: tuple[tuple[float, ...], ...]   # [bucket][kv point]

    def __call__(self, bucket: int, kv_tokens: float) -> float:
        row = self.seconds[self.buckets.index(bucket)]
        grid = self.kv_tokens
        i = min(max(bisect.bisect_right(grid, kv_tokens) - 1, 0), len(grid) - 2)
        slope = (row[i + 1] - row[i]) / (grid[i + 1] - grid[i])
        return max(row[i] + slope * (kv_tokens - grid[i]), 0.0)

    def many(self, bucket: int, kv_tokens: np.ndarray) -> np.ndarray:
        """``self(bucket, kv)`` for every KV length of an array: the same operations element by
        element, so the same floats (the request engine plans a decode block with it)."""
        row = np.asarray(self.seconds[self.buckets.index(bucket)], dtype=float)
        grid = np.asarray(self.kv_tokens, dtype=float)
        i = np.clip(np.searchsorted(grid, kv_tokens, side="right") - 1, 0, len(grid) - 2)
        slope = (row[i + 1] - row[i]) / (grid[i + 1] - grid[i])
        return np.maximum(row[i] + slope * (kv_tokens - grid[i]), 0.0)


# ------------------------------------------------------------------------ the deployment


@dataclass(frozen=True)
class ServingModel:
    """A deployment as the engine sees it: node counts, capacities, step-time functions.

    Byte counts of the KV cache are per socket of the request's DP group (the sockets that
    hold its cache), except ``shipped_bytes_per_token`` (the whole cache, once).
    """

    layout: str                                    # "disaggregated" | "colocated"
    prefill_nodes: int                             # 0 when co-located
    decode_nodes: int
    prefill_time: Callable[[int], float]           # prompt tokens -> seconds
    decode_step_time: Callable[[int, float], float]  # (batch bucket, mean KV tokens) -> seconds
    kept_tokens: Callable[[int], int]              # prompt tokens -> KV tokens kept after prefill
    kv_grows: bool                                 # the cache appends each token (else fixed size)
    batch_buckets: tuple[int, ...]                 # compiled decode batch sizes, increasing
    kv_groups: int                                 # DP groups per decode node
    kv_bytes_per_group: float                      # free HBM per socket for KV
    kv_bytes_per_token: float                      # per socket of the request's group
    shipped_bytes_per_token: float                 # whole cache per token (crosses the network)
    accepted_tokens_per_step: float = 1.0
    max_context: int = 1 << 62
    link_bytes_per_s: float = math.inf
    link_latency_s: float = 0.0
    scheduling: str = "fcfs"                       # "fcfs" | "shortest_prompt_first"
    chunk_tokens: int | None = None                # co-located chunked prefill
    draft_tokens: int = 0                          # speculative decoding: k drafted per step (0: off)
    acceptance_rate: float = 0.0                   # per-token acceptance of a draft token
    seed: int = 0                                  # of the accepted-token draws

    def __post_init__(self) -> None:
        if not self.batch_buckets or list(self.batch_buckets) != sorted(set(self.batch_buckets)):
            raise ValueError(f"batch_buckets must be increasing, got {self.batch_buckets}")
        if any(b % self.kv_groups for b in self.batch_buckets):
            raise ValueError(f"every batch bucket must be a multiple of the {self.kv_groups} DP groups")
        if self.layout == "disaggregated" and self.prefill_nodes < 1:
            raise ValueError("a disaggregated deployment needs prefill nodes")
        if self.draft_tokens and abs(self.accepted_tokens_per_step
                                     - expected_accepted(self.acceptance_rate, self.draft_tokens)) > 1e-9:
            raise ValueError("under speculative decoding accepted_tokens_per_step is the acceptance model's "
                             f"expectation ({expected_accepted(self.acceptance_rate, self.draft_tokens):g}), "
                             f"got {self.accepted_tokens_per_step:g}")

    def kv_final_tokens(self, prompt_tokens: int, output_tokens: int) -> int:
        """KV tokens a request holds at its last decode step (what admission reserves)."""
        return self.kv_final_from_kept(self.kept_tokens(prompt_tokens), output_tokens)

    def kv_final_from_kept(self, kept: int, output_tokens: int) -> int:
        """``kv_final_tokens`` from the tokens kept after prefill."""
        return kept + max(output_tokens - 1, 0) if self.kv_grows else kept


# ------------------------------------------------------------------------ results


@dataclass
class ServingRun:
    """Everything one run produced; times in seconds, NaN where a stage never happened.

    Run with a ``sink`` (``simulate_serving``), ``requests``, ``reasons`` and ``steps`` are None:
    the sink received them as they were settled."""

    requests: dict[str, np.ndarray] | None  # per request (index = request id), see REQUEST_FIELDS
    reasons: dict[int, str] | None     # rejected request id -> why
    nodes: list[dict]                  # per node: name, role, busy_prefill_s, busy_decode_s, ...
    steps: dict[str, np.ndarray] | None  # every decode step: node, start_s, duration_s (with a co-located
                                       # prefill chunk), active, bucket, itl_s (since the last delivery
                                       # to requests still active: a stall for a whole prefill counts),
                                       # tokens (delivered by the step, to every active request)
    events: list[tuple[float, str, int, str]]  # (time, event, request id, node), in order
    end_s: float


STEP_COLUMNS = ("node", "start_s", "duration_s", "active", "bucket", "itl_s", "tokens")
#: the steps' compact dtypes (a million requests make ~10M steps)
STEP_TYPES = dict(zip(STEP_COLUMNS, (np.int32, np.float64, np.float64, np.uint32, np.uint32, np.float64,
                                     np.float64), strict=True))

REQUEST_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens", "prefill_start_s", "first_token_s",
                  "decode_ready_s", "admitted_s", "finish_s", "kv_bytes_shipped", "kv_bytes_reserved",
                  "prefill_node", "decode_node", "decode_steps")
#: what the engine records of a request while it is in flight (the rest are its inputs), in this order
RECORD_FIELDS = REQUEST_FIELDS[3:]
(_PREFILL_START, _FIRST_TOKEN, _READY, _ADMITTED, _FINISH, _SHIPPED, _RESERVED, _PREFILL_NODE, _DECODE_NODE,
 _STEPS) = range(len(RECORD_FIELDS))


class ServingSink(Protocol):
    """Where a run's records go as they are settled (``simulate_serving(..., sink=)``)."""

    def request(self, request: int, record: list | None, reason: str) -> None:
        """Request ``request`` finished (``record``: its values of ``RECORD_FIELDS``, NaN where a stage
        never happened) or was rejected (``record`` None, ``reason`` why); in the order they settle."""

    def steps(self, columns: dict[str, np.ndarray]) -> None:
        """The next decode steps (``STEP_COLUMNS``), in start order (then node): every call's steps
        start after the last call's."""


def node_names(model: ServingModel) -> list[str]:
    """The nodes' names, by node index (prefill nodes first)."""
    colocated = model.layout == "colocated"
    return ([] if colocated else [f"prefill{i}" for i in range(model.prefill_nodes)]) + \
        [f"{'node' if colocated else 'decode'}{i}" for i in range(model.decode_nodes)]


class _Collect:
    """The sink of a run kept in memory: ``ServingRun.requests``, ``reasons`` and ``steps``."""

    def __init__(self, arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray) -> None:
        n = len(arrival)
        self.r = {f: np.full(n, np.nan) for f in REQUEST_FIELDS}
        self.r["arrival_s"][:] = arrival
        self.r["prompt_tokens"][:] = prompt
        self.r["output_tokens"][:] = output
        self.columns = [self.r[f] for f in RECORD_FIELDS]
        self.reasons: dict[int, str] = {}
        self.chunks: list[dict[str, np.ndarray]] = []

    def request(self, request: int, record: list | None, reason: str) -> None:
        if record is None:
            self.reasons[request] = reason
            return
        for column, value in zip(self.columns, record, strict=True):
            column[request] = value

    def steps(self, columns: dict[str, np.ndarray]) -> None:
        self.chunks.append(columns)

    def step_arrays(self) -> dict[str, np.ndarray]:
        if len(self.chunks) == 1:
            return self.chunks.pop()
        out = {n: np.concatenate([c[n] for c in self.chunks]) if self.chunks else np.empty(0, dtype=t)
               for n, t in STEP_TYPES.items()}
        self.chunks = []
        return out


@dataclass
class _Node:
    index: int
    name: str
    role: str                                         # prefill | decode | colocated
    queue: list = field(default_factory=list)         # prefill queue: heap of (key, seq, request)
    queued_s: float = 0.0                             # prefill time of the queue
    busy_until: float = 0.0
    busy_prefill_s: float = 0.0
    busy_decode_s: float = 0.0
    wake: simpy.Event | None = None
    # decode state
    waiting: deque = field(default_factory=deque)
    committed: int = 0                                # in transfer + waiting + active
    retire: list = field(default_factory=list)        # heap of (finish step, request)
    steps_done: int = 0
    active: int = 0
    kv_sum0: float = 0.0                              # sum of (kv0 - growth * admitted step)
    group_count: list[int] = field(default_factory=list)
    group_free: list[float] = field(default_factory=list)
    group_peak: list[float] = field(default_factory=list)
    tokens_decoded: float = 0.0
    ingress: BandwidthPool | None = None
    chunk_request: int = -1                           # co-located chunked prefill in progress
    chunk_done: int = 0
    admit_dirty: bool = True                          # something changed since admission last stopped
    bucket: int = 0                                   # compiled batch of the current membership
    last_step: tuple = (None, None, 0.0)              # (bucket, mean KV, seconds) of the last step
    tokens_at: float | None = None                    # last delivery to requests still active
    block: list[float] | None = None                  # coalesced decode: step ends of the steps in flight
    block_steps: int = 0                              # how many of them run (cut by a request ready mid-block)
    block_done: simpy.Event | None = None
    block_timer: simpy.Event | None = None           # the block's end on the event queue
    plan: _Plan | None = None                         # the block in flight
    block_generation: int = 0
    block_start: float | None = None                  # when the block in flight started
    deliveries: dict = field(default_factory=dict)    # speculative: step number -> tokens it delivers


@dataclass
class _Plan:
    """A coalesced decode block's steps, planned a segment (the steps up to a retirement) at a time."""

    t: float                                          # the last planned step's end
    last: tuple                                       # (bucket, mean KV, seconds) of the last step time read
    through: bool                                     # may run through retirements
    bucket: int                                       # membership after the last planned segment
    active: int
    kv_sum0: float
    steps_done: int
    counts: list[int]                                 # requests per DP group
    more: bool = False                                # another segment may follow
    ends: list[float] = field(default_factory=list)   # each step's end
    durations: list[float] = field(default_factory=list)
    segments: list[tuple] = field(default_factory=list)  # (steps up to its end, active, bucket, retiring entries)


class _Engine:
    def __init__(self, model: ServingModel, arrival_s: np.ndarray, prompt: np.ndarray, output: np.ndarray,
                 record_events: bool, coalesce: bool = True,
                 progress: Callable[[int, int], None] | None = None, sink: ServingSink | None = None) -> None:
        self.m = model
        self.coalesce = coalesce
        # a decode block may run through retirements when nothing observes them one by one: one
        # decode node (no placement by committed requests) and no event log (finishes in time order)
        self.through = coalesce and model.layout == "disaggregated" and model.decode_nodes == 1 \
            and not record_events
        self.progress = progress
        self.settled = 0                                 # requests finished or rejected
        self.env = simpy.Environment()
        n = len(arrival_s)
        self.progress_every = max(1, n // 1000)
        self.arrival = np.asarray(arrival_s, dtype=float)
        self.prompt = np.asarray(prompt, dtype=np.int64)
        self.output = np.asarray(output, dtype=np.int64)
        self.collect = _Collect(self.arrival, self.prompt, self.output) if sink is None else None
        self.sink: ServingSink = self.collect if sink is None else sink
        # the records of the requests in flight (request -> its values of RECORD_FIELDS), handed to
        # the sink when they settle: memory follows the requests in the system, not the run
        self.live: dict[int, list] = {}
        self.events: list[tuple[float, str, int, str]] | None = [] if record_events else None
        self.steps: list[tuple[int, float, float, int, int, float]] = []
        # coalesced decode steps, one compact column each (4 or 8 bytes a value); the tokens column
        # stays empty unless speculative (drain_steps computes it); drained to the sink in start order
        self.step_blocks = self.new_step_blocks()
        # drain when this many block rows are held: the rows a block in flight holds back stay,
        # so the next drain waits for STEP_CHUNK more (not one per block end)
        self.drain_at = STEP_CHUNK
        self.seq = 0
        colocated = model.layout == "colocated"
        names = node_names(model)
        self.prefill = [] if colocated else [_Node(i, names[i], "prefill") for i in range(model.prefill_nodes)]
        self.decode = [_Node(len(self.prefill) + i, names[len(self.prefill) + i],
                             "colocated" if colocated else "decode") for i in range(model.decode_nodes)]
        for node in self.decode:
            node.group_count = [0] * model.kv_groups
            node.group_free = [model.kv_bytes_per_group] * model.kv_groups
            node.group_peak = [0.0] * model.kv_groups
            if not colocated:
                node.ingress = BandwidthPool(self.env, f"{node.name}.ingress", model.link_bytes_per_s)
        self.per_group_max = model.batch_buckets[-1] // model.kv_groups
        self.growth = model.accepted_tokens_per_step if model.kv_grows else 0.0
        # per request, looked up once per distinct prompt length (the same calls as one per request)
        unique, index = np.unique(self.prompt, return_inverse=True)
        kept = np.empty(len(unique), dtype=object)    # the Python ints, shared (no object per request)
        kept[:] = [model.kept_tokens(int(p)) for p in unique]
        self.kept = kept[index]
        self.prefill_s = np.array([model.prefill_time(int(p)) for p in unique])[index] if not colocated or \
            model.chunk_tokens is None else None

    # ---------------------------------------------------------------- bookkeeping
    @staticmethod
    def new_step_blocks() -> tuple[array.array, ...]:
        return tuple(array.array(code) for code in "iddIIdd")   # STEP_TYPES

    def log(self, event: str, request: int, node: str) -> None:
        if self.events is not None:
            self.events.append((self.env.now, event, request, node))

    def wake(self, node: _Node) -> None:
        if node.wake is not None and not node.wake.triggered:
            node.wake.succeed()

    def kv_final(self, request: int) -> int:
        """``ServingModel.kv_final_tokens`` from the request's kept tokens (looked up once)."""
        return self.m.kv_final_from_kept(self.kept[request], int(self.output[request]))

    def prefill_duration(self, request: int) -> float:
        if self.prefill_s is not None:
            return float(self.prefill_s[request])
        return self.m.prefill_time(int(self.prompt[request]))

    # ---------------------------------------------------------------- arrivals
    def arrivals(self, order: np.ndarray | None, at: int) -> None:
        """Arrive requests ``order[at:]`` (None: in index order) in turn, waiting (a timeout) for the
        next one's time: the events a generator process would wait on, without its resumptions."""
        now, arrival = self.env.now, self.arrival
        while at < len(arrival):
            request = at if order is None else int(order[at])
            delay = float(arrival[request]) - now
            if delay > 0:
                timer = self.env.timeout(delay)
                timer.callbacks.append(functools.partial(self.arrived, order, at))
                return
            self.arrive(request)
            at += 1

    def arrived(self, order: np.ndarray | None, at: int, _event: simpy.Event) -> None:
        self.arrivals(order, at)

    def arrive(self, request: int) -> None:
        self.log("arrive", request, "")
        reason = self.rejection(request)
        if reason:
            self.log("reject", request, "")
            self.settle(request, None, reason)
            return
        self.live[request] = [math.nan] * len(RECORD_FIELDS)
        pool = self.decode if self.m.layout == "colocated" else self.prefill
        now = self.env.now
        # the least outstanding work (queued plus the rest of the running prefill), then the fewest
        # committed requests, then the lowest index
        node, least = None, 0.0
        for other in pool:
            work = other.queued_s + max(other.busy_until - now, 0.0)
            if node is None or work < least or (work == least and other.committed < node.committed):
                node, least = other, work
        duration = self.prefill_duration(request) if self.prefill_s is not None else 0.0
        key = self.prompt[request] if self.m.scheduling == "shortest_prompt_first" else 0
        heapq.heappush(node.queue, (int(key), self.seq, request))
        self.seq += 1
        node.queued_s += duration
        if node.role == "colocated":
            node.committed += 1
        self.wake(node)

    def rejection(self, request: int) -> str:
        prompt, output = int(self.prompt[request]), int(self.output[request])
        if prompt > self.m.max_context:
            return f"prompt of {prompt} tokens exceeds max_context {self.m.max_context}"
        need = self.kv_final(request) * self.m.kv_bytes_per_token
        if output > 1 and need > self.m.kv_bytes_per_group:
            return (f"its KV cache ({self.kv_final(request)} tokens, {need / 2**30:.2f} GiB "
                    f"per socket) never fits the {self.m.kv_bytes_per_group / 2**30:.2f} GiB a decode socket "
                    "has free")
        return ""

    # ---------------------------------------------------------------- prefill nodes
    def prefill_node(self, node: _Node) -> Generator:
        while True:
            if not node.queue:
                node.wake = self.env.event()
                yield node.wake
                continue
            yield from self.prefill_next(node)

    def prefill_next(self, node: _Node) -> Generator:
        """Prefill the node's next queued request, then hand it its first token."""
        _, _, request = heapq.heappop(node.queue)
        duration = self.prefill_duration(request)
        node.queued_s -= duration
        node.busy_until = self.env.now + duration
        record = self.live[request]
        record[_PREFILL_START] = self.env.now
        record[_PREFILL_NODE] = node.index
        self.log("prefill_start", request, node.name)
        yield self.env.timeout(duration)
        node.busy_prefill_s += duration
        self.first_token(request, node)

    def first_token(self, request: int, node: _Node) -> None:
        self.live[request][_FIRST_TOKEN] = self.env.now
        self.log("first_token", request, node.name)
        if self.output[request] <= 1:
            self.finish(request, node)
            if node.role == "colocated":
                node.committed -= 1
            return
        if node.role == "colocated":
            self.live[request][_SHIPPED] = 0.0
            self.ready(request, node)
            return
        target = min(self.decode, key=lambda n: (n.committed, n.index))
        target.committed += 1
        self.soon(lambda _e: self.transfer(request, target))

    def soon(self, callback: Callable[[simpy.Event], None]) -> None:
        """Call back once the current event is done, before any other event of this time: when a
        process started now would run its first step (SimPy's urgent initialisation event)."""
        start = simpy.Event(self.env)
        start._ok, start._value = True, None   # noqa: SLF001 (triggered as Process's Initialize is)
        start.callbacks.append(callback)
        self.env.schedule(start, URGENT)

    def transfer(self, request: int, target: _Node) -> None:
        """Ship the request's kept cache: the link's latency, then its bytes through the decode
        node's ingress; ready on the decode node when they have landed (callbacks on the events a
        process would wait on)."""
        nbytes = self.kept[request] * self.m.shipped_bytes_per_token
        self.live[request][_SHIPPED] = nbytes
        self.log("transfer_start", request, target.name)
        if self.m.link_latency_s > 0:
            self.env.timeout(self.m.link_latency_s).callbacks.append(lambda _e: self.send(request, target, nbytes))
        else:
            self.send(request, target, nbytes)

    def send(self, request: int, target: _Node, nbytes: float) -> None:
        target.ingress.transfer(nbytes).callbacks.append(lambda _e: self.ready(request, target))

    def ready(self, request: int, node: _Node) -> None:
        record = self.live[request]
        record[_READY] = self.env.now
        record[_DECODE_NODE] = node.index
        self.log("decode_ready", request, node.name)
        node.waiting.append(request)
        node.admit_dirty = True
        self.wake(node)
        if node.block is not None:
            self.cut_block(node)

    def finish(self, request: int, node: _Node, at: float | None = None) -> None:
        record = self.live.pop(request)
        record[_FINISH] = self.env.now if at is None else at
        self.log("finish", request, node.name)
        self.settle(request, record, "")

    def settle(self, request: int, record: list | None, reason: str) -> None:
        """One more request done or rejected: to the sink; progress every 0.1% of them."""
        self.sink.request(request, record, reason)
        self.settled += 1
        if self.progress is not None and (self.settled % self.progress_every == 0 or self.settled == len(self.arrival)):
            self.progress(self.settled, len(self.arrival))

    # ---------------------------------------------------------------- decode nodes
    def admit(self, node: _Node) -> None:
        if not node.admit_dirty:
            return
        node.admit_dirty = False
        m = self.m
        while node.waiting and node.active < self.per_group_max * m.kv_groups:
            request = node.waiting[0]
            kv_final = self.kv_final(request)
            need = kv_final * m.kv_bytes_per_token
            # the group with the fewest requests that has room (then the most free bytes, then the lowest index)
            best, best_count, best_free, most = -1, 0, 0.0, self.per_group_max
            for g, (count, free) in enumerate(zip(node.group_count, node.group_free, strict=True)):
                if count < most and free >= need and (
                        best < 0 or count < best_count or (count == best_count and free > best_free)):
                    best, best_count, best_free = g, count, free
            if best < 0:
                break
            node.waiting.popleft()
            node.group_count[best] += 1
            node.group_free[best] -= need
            node.group_peak[best] = max(node.group_peak[best], m.kv_bytes_per_group - node.group_free[best])
            steps = self.schedule_bursts(node, request) if m.draft_tokens else \
                math.ceil((int(self.output[request]) - 1) / m.accepted_tokens_per_step)
            heapq.heappush(node.retire, (node.steps_done + steps, request, best, need))
            kv0 = self.kept[request]
            node.kv_sum0 += kv0 - self.growth * node.steps_done
            node.active += 1
            record = self.live[request]
            record[_ADMITTED] = self.env.now
            record[_RESERVED] = need
            record[_STEPS] = steps
            if self.events is not None:
                self.log("admit", request, node.name)
        self.set_bucket(node)

    def schedule_bursts(self, node: _Node, request: int) -> int:
        """Speculative decoding: draw the request's bursts, book each on the step that delivers it,
        and return how many steps it takes (the last burst cut at its output length)."""
        m = self.m
        rng = np.random.default_rng([m.seed, request])
        uniform = rng.random
        left, step = int(self.output[request]) - 1, node.steps_done
        while left > 0:
            burst = min(draw_accepted(m.acceptance_rate, m.draft_tokens, uniform), left)
            step += 1
            node.deliveries[step] = node.deliveries.get(step, 0) + burst
            left -= burst
        return step - node.steps_done

    def set_bucket(self, node: _Node) -> None:
        need = max(node.group_count) * self.m.kv_groups
        node.bucket = self.m.batch_buckets[bisect.bisect_left(self.m.batch_buckets, need)] if need else 0

    def decode_node(self, node: _Node) -> Generator:
        m = self.m
        while True:
            self.admit(node)
            if self.coalesce and node.role == "decode" and node.active:
                yield from self.decode_block(node)
                continue
            if node.role == "colocated" and node.queue and m.chunk_tokens is None:
                yield from self.prefill_next(node)
                continue
            chunk_s, chunk_request = self.next_chunk(node) if node.role == "colocated" else (0.0, -1)
            if not node.active and chunk_request < 0:
                node.wake = self.env.event()
                yield node.wake
                continue
            step_s, tokens = 0.0, 0.0
            if node.active:
                bucket = node.bucket
                mean_kv = (node.kv_sum0 + self.growth * node.active * node.steps_done) / node.active
                if node.last_step[0] == bucket and node.last_step[1] == mean_kv:
                    step_s = node.last_step[2]
                else:
                    step_s = m.decode_step_time(bucket, mean_kv)
                    node.last_step = (bucket, mean_kv, step_s)
                if step_s <= 0:
                    raise SimulationError(f"decode step time {step_s} s at batch {bucket}, KV {mean_kv:.0f}")
                since = node.tokens_at if node.tokens_at is not None else self.env.now
                tokens = node.deliveries.pop(node.steps_done + 1, 0) if m.draft_tokens else \
                    m.accepted_tokens_per_step * node.active
                self.steps.append((node.index, self.env.now, step_s + chunk_s, node.active, bucket,
                                   self.env.now + step_s + chunk_s - since, tokens))
                if len(self.steps) >= STEP_CHUNK:
                    self.drain_steps()
            yield self.env.timeout(step_s + chunk_s)
            node.busy_decode_s += step_s
            node.busy_prefill_s += chunk_s
            if chunk_request >= 0 and node.chunk_done >= self.prompt[chunk_request]:
                node.chunk_request = -1
                self.first_token(chunk_request, node)
            if step_s > 0:
                node.steps_done += 1
                node.tokens_decoded += tokens
                self.retire(node)
                node.tokens_at = self.env.now if node.active else None

    # ---------------------------------------------------------------- coalesced decode (the default)
    def decode_block(self, node: _Node) -> Generator:
        """The steps up to the next disturbance as one event: between two disturbances a decode
        node's membership only shrinks at retirements known in advance, so each step's time is
        known (the mean KV grows by a fixed amount a step). The block ends at the next retirement,
        or, when nothing can observe a retirement (``self.through``: no request waits for the room
        it frees and no other decode node competes for new requests), runs on through it: the
        block's timer plans the next segment when it fires at a retirement (``block_timer``),
        until the node empties or a request becomes ready. A request ready mid-block cuts it at
        the next step boundary, where the per-step engine would admit it. Every number is
        computed with the same operations in the same order as the per-step engine
        (``coalesce=False``)."""
        now = node.block_start = self.env.now
        plan = node.plan = _Plan(t=now, last=node.last_step, through=self.through and not node.waiting,
                                 bucket=node.bucket, active=node.active, kv_sum0=node.kv_sum0,
                                 steps_done=node.steps_done, counts=list(node.group_count))
        self.plan_next(node, plan)
        node.block = plan.ends
        yield from self.wait_block(node, len(plan.ends))
        n = node.block_steps
        node.block = node.plan = node.block_start = None
        self.record_block(node, plan, n, now)
        if len(self.step_blocks[0]) >= self.drain_at:
            self.drain_steps()
        node.steps_done += n
        node.last_step = plan.last if n == len(plan.ends) else node.last_step
        self.retire(node)
        node.tokens_at = self.env.now if node.active else None

    def plan_next(self, node: _Node, plan: _Plan) -> None:
        """Plan one more segment: the steps up to the next retirement; ``plan.through``: its
        requests retire there in closed form (popped from the node's heap now, pushed back if
        the block is cut before)."""
        retire, stop = node.retire, node.retire[0][0]
        bad = self.plan_segment(plan, plan.bucket, plan.active, plan.kv_sum0, plan.steps_done, stop)
        if bad or not plan.through:
            plan.segments.append((len(plan.ends), plan.active, plan.bucket, ()))
            plan.more = False
            return
        entries = []
        while retire and retire[0][0] == stop:
            entries.append(heapq.heappop(retire))
        plan.segments.append((len(plan.ends), plan.active, plan.bucket, entries))
        plan.steps_done = stop
        for _, request, group, _need in entries:
            plan.counts[group] -= 1
            plan.active -= 1
            plan.kv_sum0 -= self.kv_retired(request, stop)
        plan.more = plan.active > 0 and len(plan.ends) < BLOCK_STEPS
        if plan.more:
            need = max(plan.counts) * self.m.kv_groups
            plan.bucket = self.m.batch_buckets[bisect.bisect_left(self.m.batch_buckets, need)]

    def plan_segment(self, plan: _Plan, bucket: int, active: int, kv_sum0: float, steps_done: int,
                     stop: int) -> bool:
        """Steps ``steps_done`` to ``stop`` of a fixed membership onto ``plan``; True when a step
        time is not positive (the plan stops before it; raised here if it is the block's first)."""
        m, growth = self.m, self.growth
        many = getattr(m.decode_step_time, "many", None)   # a DecodeTable: a vector of KV lengths at once
        last_bucket, last_kv, last_s = plan.last
        if growth and (many is None or stop - steps_done < VECTOR_STEPS):
            for done in range(steps_done, stop):   # step by step: the mean KV grows every step
                mean_kv = (kv_sum0 + growth * active * done) / active
                if last_bucket == bucket and last_kv == mean_kv:
                    step_s = last_s
                else:
                    step_s = m.decode_step_time(bucket, mean_kv)
                    last_bucket, last_kv, last_s = bucket, mean_kv, step_s
                    plan.last = (bucket, mean_kv, step_s)
                if step_s <= 0:
                    if not plan.durations:
                        raise SimulationError(f"decode step time {step_s} s at batch {bucket}, KV {mean_kv:.0f}")
                    return True   # run up to the bad step, which then fails as it would step by step
                plan.durations.append(step_s)
                plan.t = plan.t + step_s
                plan.ends.append(plan.t)
            return False
        if growth:   # a vector of step times (the same floats as one at a time)
            mean_kv = (kv_sum0 + growth * active * np.arange(steps_done, stop)) / active
            seconds = many(bucket, mean_kv)
            bad_at = np.flatnonzero(~(seconds > 0))
            count = int(bad_at[0]) if len(bad_at) else stop - steps_done
            steps = seconds[:count].tolist()
            first_kv, first_s = float(mean_kv[0]), float(seconds[0])
            if count:
                plan.last = (bucket, float(mean_kv[count - 1]), steps[-1])
        else:        # a fixed-size cache: the mean KV, so the step time, is the same every step
            first_kv = (kv_sum0 + growth * active * steps_done) / active
            first_s = last_s if last_bucket == bucket and last_kv == first_kv else m.decode_step_time(bucket, first_kv)
            plan.last = (bucket, first_kv, first_s)
            count = stop - steps_done if first_s > 0 else 0
            steps = [first_s] * count
        if count < stop - steps_done and not plan.durations and not count:
            raise SimulationError(f"decode step time {first_s} s at batch {bucket}, KV {first_kv:.0f}")
        if steps:
            plan.durations += steps
            ends = plan.ends
            ends += itertools.accumulate(steps, operator.add, initial=plan.t)   # t + s, in order
            ends.pop(len(ends) - len(steps) - 1)   # the initial t
            plan.t = ends[-1]
        return count < stop - steps_done

    def record_block(self, node: _Node, plan: _Plan, n: int, now: float) -> None:
        """The first ``n`` steps of a block ran: record them and retire their requests in order."""
        m, ends, durations = self.m, plan.ends, plan.durations
        since = node.tokens_at if node.tokens_at is not None else now
        start, busy, tokens = now, node.busy_decode_s, node.tokens_decoded
        columns = self.step_blocks
        starts, itl, delivered = columns[1], columns[5], columns[6]
        first = 0
        for last, active, bucket, entries in plan.segments:
            upto = min(last, n)
            if upto > first:
                count = upto - first
                columns[0].extend([node.index] * count)
                columns[2].extend(durations[first:upto])
                columns[3].extend([active] * count)
                columns[4].extend([bucket] * count)
                # each step starts where the last ended; sums in step order, as step by step
                starts.append(start)
                starts.extend(ends[first:upto - 1])
                itl.append(ends[first] - since)
                itl.extend(map(operator.sub, ends[first + 1:upto], ends[first:upto - 1]))
                busy = functools.reduce(operator.add, durations[first:upto], busy)
                if m.draft_tokens:   # speculative decoding: the bursts drawn at admission for each step
                    pop = node.deliveries.pop
                    step_tokens = [pop(node.steps_done + 1 + j, 0) for j in range(first, upto)]
                    delivered.extend(step_tokens)
                else:                # not stored: step_arrays computes the same product
                    step_tokens = [m.accepted_tokens_per_step * active] * count
                tokens = functools.reduce(operator.add, step_tokens, tokens)
                since = start = ends[upto - 1]
            if entries:
                if last <= n:            # the segment ran to its end: its requests retire there
                    node.busy_decode_s, node.tokens_decoded = busy, tokens
                    self.retire_entries(node, node.steps_done + last, entries, ends[last - 1])
                    busy, tokens = node.busy_decode_s, node.tokens_decoded
                else:                    # cut before: they are still active
                    for entry in entries:
                        heapq.heappush(node.retire, entry)
            first = upto
        node.busy_decode_s, node.tokens_decoded = busy, tokens

    def wait_block(self, node: _Node, count: int) -> Generator:
        node.block_done = self.env.event()
        self.end_block_at(node, count)
        yield node.block_done

    def end_block_at(self, node: _Node, count: int) -> None:
        """(Re)arm the block's end at its ``count``-th step end, exactly that float."""
        assert node.block is not None
        node.block_generation += 1
        node.block_steps = count
        generation, end = node.block_generation, node.block[count - 1]
        if node.block_timer is not None and not node.block_timer.processed:
            self.cancel(node.block_timer)
        # a timeout's time is now + delay, and for some (now, end) no float delay gives exactly
        # ``end`` (the sums either side round away from it): queue the timer at ``end`` itself,
        # as ``Environment.schedule`` queues a timeout (the same priority and event id)
        timer = node.block_timer = simpy.Event(self.env)
        timer._ok, timer._value = True, None   # noqa: SLF001 (triggered as a Timeout is)
        timer.callbacks.append(lambda _e: self.block_timer(node, generation))
        heapq.heappush(self.env._queue, (end, NORMAL, next(self.env._eid), timer))   # noqa: SLF001

    def cancel(self, timer: simpy.Event) -> None:
        """Take a block's superseded end off the event queue (SimPy has no cancel): left there it
        would still fire, costing an event and moving the clock past the run's last real event."""
        queue = self.env._queue   # noqa: SLF001 (a handful of pending events: one per node and transfer)
        for i, entry in enumerate(queue):
            if entry[3] is timer:
                queue[i] = queue[-1]
                queue.pop()
                heapq.heapify(queue)
                return

    def block_timer(self, node: _Node, generation: int) -> None:
        if generation != node.block_generation or node.block_done is None:
            return
        plan = node.plan
        if plan is not None and plan.more and not node.waiting and node.block_steps == len(plan.ends):
            self.plan_next(node, plan)   # nobody to admit at this retirement: run on through it
            if len(plan.ends) > node.block_steps:
                self.end_block_at(node, len(plan.ends))
                return
        node.block_done.succeed()

    def cut_block(self, node: _Node) -> None:
        """A request became ready mid-block: the block ends at the step end now or next."""
        assert node.block is not None
        count = bisect.bisect_left(node.block, self.env.now) + 1
        if count < node.block_steps:
            self.end_block_at(node, count)

    def retire(self, node: _Node) -> None:
        if not node.retire or node.retire[0][0] != node.steps_done:
            return
        entries = []
        while node.retire and node.retire[0][0] == node.steps_done:
            entries.append(heapq.heappop(node.retire))
        self.retire_entries(node, node.steps_done, entries, self.env.now)

    def retire_entries(self, node: _Node, steps_done: int, entries: list, at: float) -> None:
        """Retire the requests of ``entries`` (popped from ``node.retire`` in heap order) after
        the node's ``steps_done``-th step, which ended at ``at``."""
        node.admit_dirty = True
        for _, request, group, need in entries:
            node.group_count[group] -= 1
            node.group_free[group] += need
            node.active -= 1
            node.kv_sum0 -= self.kv_retired(request, steps_done)
            steps = self.live[request][_STEPS]
            if not self.m.draft_tokens:  # the fractional tokens of the last step beyond the output
                node.tokens_decoded -= steps * self.m.accepted_tokens_per_step - (self.output[request] - 1)
            node.committed -= 1
            self.finish(request, node, at)
        if node.active == 0:
            node.kv_sum0 = 0.0   # drop rounding left by the running sum
        self.set_bucket(node)

    def kv_retired(self, request: int, steps_done: int) -> float:
        """What a request retiring after the node's ``steps_done``-th step takes off ``kv_sum0``."""
        return self.kept[request] - self.growth * (steps_done - self.live[request][_STEPS])

    def next_chunk(self, node: _Node) -> tuple[float, int]:
        """Co-located chunked prefill: the next chunk of the prompt in progress (or next in queue)."""
        if self.m.chunk_tokens is None:
            return 0.0, -1
        if node.chunk_request < 0:
            if not node.queue:
                return 0.0, -1
            _, _, node.chunk_request = heapq.heappop(node.queue)
            node.chunk_done = 0
            record = self.live[node.chunk_request]
            record[_PREFILL_START] = self.env.now
            record[_PREFILL_NODE] = node.index
            self.log("prefill_start", node.chunk_request, node.name)
        request = node.chunk_request
        start = node.chunk_done
        end = min(start + self.m.chunk_tokens, int(self.prompt[request]))
        node.chunk_done = end
        chunk_s = self.m.prefill_time(end) - (self.m.prefill_time(start) if start else 0.0)
        return chunk_s, request

    # ---------------------------------------------------------------- run
    def run(self) -> ServingRun:
        order = None if np.all(self.arrival[1:] >= self.arrival[:-1]) else np.argsort(self.arrival, kind="stable")
        self.soon(lambda _e: self.arrivals(order, 0))
        for node in self.prefill:
            self.env.process(self.prefill_node(node))
        for node in self.decode:
            self.env.process(self.decode_node(node))
        self.env.run()
        for node in self.decode:
            if node.active or node.waiting or node.queue or node.chunk_request >= 0:
                raise SimulationError(f"{node.name}: requests left unfinished when the events ran out")
        self.drain_steps(final=True)
        if self.collect is None:
            return ServingRun(None, None, self.node_records(), None, self.events or [], float(self.env.now))
        return ServingRun(self.collect.r, self.collect.reasons, self.node_records(), self.collect.step_arrays(),
                          self.events or [], float(self.env.now))

    def node_records(self) -> list[dict]:
        records = []
        for node in self.prefill + self.decode:
            record = {"node": node.name, "index": node.index, "role": node.role,
                      "busy_prefill_s": node.busy_prefill_s, "busy_decode_s": node.busy_decode_s}
            if node.role != "prefill":
                record |= {"decode_steps": node.steps_done, "tokens_decoded": node.tokens_decoded,
                           "kv_peak_bytes": max(node.group_peak), "kv_free_bytes_at_end": min(node.group_free),
                           "kv_capacity_bytes": self.m.kv_bytes_per_group,
                           "ingress_bytes": node.ingress.bytes_total if node.ingress else 0.0}
            records.append(record)
        return records

    def drain_steps(self, final: bool = False) -> None:
        """Hand the recorded decode steps that no later step can precede to the sink, in start
        order (then node): a later step starts at or after now and after the start of every block
        in flight. Coalesced blocks are recorded when they end, so steps of several decode nodes
        arrive out of order; one node's come in order. Without speculative decoding a coalesced
        step's tokens are not stored but computed here, ``accepted_tokens_per_step * active``, the
        product the step computed."""
        parts = []
        if self.steps:
            columns = list(zip(*self.steps, strict=True))
            parts.append({n: np.asarray(c, dtype=STEP_TYPES[n]) for n, c in zip(STEP_COLUMNS, columns, strict=True)})
            self.steps = []
        if len(self.step_blocks[0]):
            blocks = dict(zip(STEP_COLUMNS, self.step_blocks, strict=True))
            self.step_blocks = self.new_step_blocks()
            part = {n: np.frombuffer(blocks[n], dtype=STEP_TYPES[n]) for n in STEP_COLUMNS if n != "tokens"}
            part["tokens"] = np.frombuffer(blocks["tokens"], dtype=np.float64) if self.m.draft_tokens else \
                self.m.accepted_tokens_per_step * part["active"]
            parts.append(part)
        if not parts:
            return
        merged = parts[0] if len(parts) == 1 else \
            {n: np.concatenate([p[n] for p in parts]) for n in STEP_COLUMNS}
        start, node = merged["start_s"], merged["node"]
        if not np.all((start[1:] > start[:-1]) | ((start[1:] == start[:-1]) & (node[1:] >= node[:-1]))):
            order = np.lexsort((node, start))
            merged = {n: c[order] for n, c in merged.items()}
        if not final:
            starts = [n.block_start for n in self.decode if n.block_start is not None]
            cut = int(np.searchsorted(merged["start_s"], min([self.env.now, *starts]), side="left"))
            for n, column in zip(STEP_COLUMNS, self.step_blocks, strict=True):   # the rest waits
                if n != "tokens" or self.m.draft_tokens:
                    column.frombytes(np.ascontiguousarray(merged[n][cut:]).tobytes())
            merged = {n: c[:cut] for n, c in merged.items()}
            self.drain_at = len(self.step_blocks[0]) + STEP_CHUNK
        if len(merged["start_s"]):
            self.sink.steps(merged)


def simulate_serving(model: ServingModel, arrival_s: np.ndarray, prompt_tokens: np.ndarray,
                     output_tokens: np.ndarray, *, record_events: bool = False, coalesce: bool = True,
                     progress: Callable[[int, int], None] | None = None,
                     sink: ServingSink | None = None) -> ServingRun:
    """Run every request through the deployment; request ``i`` is row ``i`` of the result.

    ``progress(settled, total)`` is called as requests finish or are rejected (every 0.1%).

    Deterministic: no random numbers are drawn here (the workload carries the seed), and
    ties are broken by node index and arrival order. ``coalesce=False`` runs a disaggregated
    deployment's decode nodes step by step (one event per step) instead of a block of steps
    per event between disturbances; both give the same numbers.

    ``sink``: each request's record goes to ``sink.request`` as it finishes or is rejected, and the
    decode steps to ``sink.steps`` in start order a chunk at a time; nothing of them is kept here
    (``ServingRun.requests``, ``reasons`` and ``steps`` are None). Without a sink they are
    collected into the ``ServingRun``.
    """
    if not (len(arrival_s) == len(prompt_tokens) == len(output_tokens)):
        raise ValueError("arrival_s, prompt_tokens and output_tokens must have the same length")
    return _Engine(model, arrival_s, prompt_tokens, output_tokens, record_events, coalesce, progress, sink).run()
