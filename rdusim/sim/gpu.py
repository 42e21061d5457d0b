"""The engine's GPU target: library kernels run one at a time over a GPU's SMs.

Owns: ``simulate_gpu``, ``elapsed_s``. Imports: resources, ring, trace, mapping.gpu, hw.gpu.

A GPU is not a spatial pipeline: it runs one kernel at a time across all of its SMs. Each
kernel is a grid of CTAs (``rdusim.mapping.gpu``); the block scheduler places CTAs on SMs with
a free slot, in launch order, as earlier CTAs finish (waves and tails come out of this).
HBM is one pool shared by weighted processor sharing among all resident CTAs
(``WeightedPool``: a CTA's loads get an equal share, so a kernel with few CTAs still streams at
full bandwidth, and SMs with fewer resident CTAs do not idle their share); each CTA gets its
SM's tensor rate divided by the CTAs resident there. A CTA waits one DRAM round trip, then runs
its main loop with the loads of the next tile overlapping the math of this one (``_bundle``).
A tensor-core kernel (GEMM, attention) also pays a fixed pipeline cost (``launch.pipeline``:
prologue, epilogue and grid drain), or the fixed cost its ``GpuKernel.fixed`` names (FA2's
split-KV pair, where the GPU document gives it). The launch path decides what a kernel costs before its
CTAs run: ``stream`` (one kernel timed alone), ``graph`` (CUDA graph replay) or ``eager`` (a
host process dispatches every op at its kind's host cost in a step, ``Gpu.host_op_s``, or ``eager_host``
where the document prices none, and the GPU runs behind it, each kernel taken from the launch queue at
``launch.eager_gap``). An NCCL
collective (``math == "nvlink"``) takes NCCL's latency for the algorithm and protocol its tuner
picks (``rdusim.hw.collectives``) plus its transfer: a ring Simple one's channels simulated
(``rdusim.sim.ring``: they share the link, their local steps idle it while they run in step),
any other the GPU's wire bytes at the protocol's bus rate; its bytes are recorded as NVLink
bytes, not HBM. Captured in a graph it also pays ``launch.graph_event_pair``
(the event wait and record nodes NCCL adds to a captured launch; vLLM's custom all-reduce, where a
mapping asks for it, is its own kernel, simulated block by block by ``rdusim.sim.custom_ar``, and
adds none); eager, the host pays its
torch.distributed call (``launch.collective_host``), so back-to-back calls run at the slower of
host and device.

With an ``SmClock`` (``clock=``; the GPU document's ``clock`` section, off by default) the SM
clock follows the board power limit: each kernel runs at full clock through the CTA model, then
takes the extra time the controller's clock gives its class (``rdusim.hw.gpu_clock``); the
controller sees every kernel's full-clock power for the time it ran and idle power in the gaps.
The state lives in the ``SmClock``, so passes chained on one object run back to back.

A persistent kernel (``GpuKernel.persistent``: FlashAttention-3's forward, one CTA an SM
walking the tiles) runs its grid's CTAs as tiles: a tile placed after the first wave had its Q and
first K block issued while the tile before it computed; its other loads wait for that tile's
output store, so a round trip and its first block's loads are exposed (``_prefetched_bundle``).

Identical CTAs placed at the same instant on equally occupied SMs move as one bundle (same
finish time under processor sharing), so a wave costs a few events, not one per CTA. A kernel's
grid starts on an idle GPU (the one before it has ended) and nothing else runs beside it, so its
time depends on the kernel, the GPU and the launch mode alone: a pass simulates each distinct
kernel's grid once, in an environment of its own from time zero (``_grid_s``), and every kernel
equal to it (the same kernel in each layer) takes that time again. ``Trace.event_count`` counts
the pass's events and each grid's once.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import simpy

from rdusim.config.schema import HBM
from rdusim.hw.gpu import Gpu
from rdusim.hw.gpu_clock import SmClock
from rdusim.mapping.gpu import CtaGroup, GpuKernel
from rdusim.sim.resources import WeightedPool, delay
from rdusim.sim.ring import collective_time_s
from rdusim.sim.trace import KernelRecord, Trace

#: the math classes of tensor-core kernels: the SM's tensor rate applies and they pay a pipeline cost
TENSOR_MATH = ("gemm", "attention", "mla", "fa3")


class _Gpu:
    """The GPU's SMs and memory while one kernel's grid runs on them (``_grid_s``)."""

    def __init__(self, env: simpy.Environment, gpu: Gpu, mode: str = "graph") -> None:
        self.hbm = WeightedPool(env, gpu.hbm_bytes_per_s)
        l2 = gpu.l2_bytes_per_s
        self.l2 = WeightedPool(env, l2) if l2 else None
        self.used = [0] * gpu.sms
        self.latency_s = gpu.hbm_latency_s
        self.sm_flops = {m: gpu.math_flops_per_s(m) / gpu.sms for m in TENSOR_MATH}
        self.fa3_pipe_busy = gpu.fa3_pipe_busy
        self.sm_tensor_peak = gpu.tensor_peak_flops_per_s() / gpu.sms
        sfu, smem = gpu.sfu_per_s, gpu.shared_bytes_per_s
        self.sm_sfu = sfu / gpu.sms if sfu else None
        self.sm_smem = smem / gpu.sms if smem else None
        self.gpu, self.mode = gpu, mode
        self.l2_latency_s = gpu.l2_latency_s
        self.strided_derate = gpu.strided_stream_derate
        self.gemm_step_s = gpu.launch_s("gemm_step")
        self.attention_overlap = gpu.attention_overlap


def simulate_gpu(kernels: Sequence[tuple[GpuKernel, int]], gpu: Gpu, *, mode: str = "graph",
                 clock: SmClock | None = None) -> Trace:
    """Run ``kernels`` in order (each ``(kernel, layer)``); the trace has one record per kernel,
    and the last one ends when the pass does (``elapsed_s``). ``clock``: the GPU's SM-clock state
    (None: always full clock), advanced by this pass."""
    if mode not in ("graph", "eager", "stream"):
        raise ValueError(f"launch mode must be graph, eager or stream, got {mode!r}")
    env = simpy.Environment()
    depth = gpu.queue_depth if mode == "eager" else None
    issued = simpy.Store(env, capacity=depth) if depth else simpy.Store(env)
    records: list[KernelRecord] = []
    grids: dict[GpuKernel, tuple[float, int]] = {}  # kernel -> (its grid's time, that simulation's events)
    env.process(_host(env, kernels, gpu, mode, issued))
    done = env.process(_device(env, kernels, gpu, mode, issued, records, clock, grids))
    env.run(until=done)
    return Trace(kernels=tuple(records), layers_simulated=len({layer for _, layer in kernels}),
                 event_count=next(env._eid) + sum(events for _, events in grids.values()))


def elapsed_s(trace: Trace) -> float:
    """Simulated time of a GPU pass: the end of its last kernel (the device runs them in order)."""
    return trace.kernels[-1].end_s if trace.kernels else 0.0


def _host(env: simpy.Environment, kernels: Sequence[tuple[GpuKernel, int]], gpu: Gpu, mode: str,
          issued: simpy.Store) -> Generator:
    """Eager: the host dispatches op by op, each op of a kernel's ``host_ops`` at its kind's host
    cost in a step (``Gpu.host_op_s``, where the GPU document gives every one: ``Gpu.prices_host_ops``),
    the same whether the GPU keeps up or has a backlog (run dq); a kernel whose host cost
    those priced ops already hold (``GpuKernel.host_paid``: the second kernel of one library call)
    costs nothing more; any other kernel without ``host_ops`` costs ``launches`` x
    ``eager_host``. A launch blocks while ``queue_depth`` kernels wait. Graph and stream hand
    every kernel over at once."""
    priced = False  # the last kernel's host cost came from its priced host_ops (or was paid by them)
    for index, (kernel, _) in enumerate(kernels):
        if mode == "eager" and not (kernel.host_paid and priced):
            priced = bool(kernel.host_ops) and gpu.prices_host_ops(kernel.host_ops)
            if priced:
                for op in kernel.host_ops:
                    yield delay(env, gpu.host_op_s(op))
            else:
                yield delay(env, kernel.launches * gpu.launch_s("eager"))
        yield issued.put(index)


def _device(env: simpy.Environment, kernels: Sequence[tuple[GpuKernel, int]], gpu: Gpu, mode: str,
            issued: simpy.Store, records: list[KernelRecord],
            clock: SmClock | None, grids: dict[GpuKernel, tuple[float, int]]) -> Generator:
    gap = {"graph": gpu.launch_s("graph"), "stream": gpu.launch_s("stream"),
           "eager": gpu.launch_s("eager_gap")}[mode]
    free_since = env.now
    for kernel, layer in kernels:
        yield issued.get()
        start = env.now
        fixed = gpu.launch_s(kernel.fixed or ("gemm_pipeline" if kernel.math == "gemm" else "pipeline"))
        queued = kernel.queued and mode == "stream"  # already queued by the call before: no host launch
        overhead = (gpu.launch_s("graph") if queued else gap) * kernel.launches
        if mode == "eager" and kernel.math == "nvlink":  # NCCL's latency, timed stream-launched
            overhead = 0.0
        overhead += fixed if kernel.fixed or kernel.math in TENSOR_MATH else 0.0
        if kernel.round_trips and (mode != "stream" or queued):  # stream's launch holds a kernel's own fixed time
            overhead += kernel.launches * gpu.kernel_fixed_s
        if kernel.math == "nvlink" and mode == "graph" and kernel.collective.custom is None:
            # NCCL's event wait + record nodes around it (vLLM's own kernel has none)
            overhead += gpu.launch_s("graph_event_pair")
        yield delay(env, overhead)
        if clock is not None:
            clock.idle(env.now - free_since)
        began = env.now
        if kernel.math == "nvlink":  # an NCCL collective: NCCL's latency + its transfer (sim.ring)
            yield delay(env, collective_time_s(kernel.collective))
        else:
            if kernel not in grids:
                grids[kernel] = _grid_s(kernel, gpu, mode)
            yield delay(env, grids[kernel][0])
        if clock is not None:  # the same work at the controller's clock
            full = env.now - began
            at_clock = clock.run_kernel(full, kernel.math, kernel.flops, kernel.bytes, kernel.keys)
            yield delay(env, max(0.0, at_clock - full))
        free_since = env.now
        records.append(KernelRecord(
            kernel=kernel.name, layer_type=kernel.math, layer=layer, start_s=start, end_s=env.now,
            launch_sync_s=overhead, stage_busy_s={}, stage_pcus={}, pool_busy_s={},
            pool_bytes={("nvlink" if kernel.math == "nvlink" else HBM): kernel.bytes, "flops": kernel.flops},
        ))


def _grid_s(kernel: GpuKernel, gpu: Gpu, mode: str) -> tuple[float, int]:
    """Seconds ``kernel``'s grid takes on an idle ``gpu`` launched in ``mode`` (from its first CTA's
    placement to its last CTA's end), simulated alone from time zero, and that simulation's events."""
    env = simpy.Environment()
    grid = env.process(_run_grid(env, kernel, _Gpu(env, gpu, mode)))
    env.run(until=grid)
    return env.now, next(env._eid)


def _run_grid(env: simpy.Environment, kernel: GpuKernel, state: _Gpu) -> Generator:
    """Place the grid's CTAs on free SM slots in launch order; return when all have finished.

    The block scheduler fills the emptiest SMs first, one CTA per SM per round. CTAs placed
    at one instant on SMs that end up equally occupied move as one bundle."""
    freed = [env.event()]
    running: list[simpy.Process] = []
    cap = kernel.ctas_per_sm
    derate = state.gpu.gemm_kernel_derate(kernel.bytes, state.mode) if kernel.math == "gemm" else 1.0
    first_wave = True  # the CTAs placed at launch, before any of the grid's has finished
    for group in kernel.groups:
        left = group.count
        while left:
            free = sorted((u, i) for i, u in enumerate(state.used) if u < cap)
            if not free:
                yield freed[0]
                first_wave = False
                continue
            placed = [0] * len(state.used)
            take = min(left, sum(cap - u for u, _ in free))
            left -= take
            while take:
                for u, i in free:
                    if take and u + placed[i] < cap:
                        placed[i] += 1
                        take -= 1
            bundles: dict[int, list] = {}  # occupancy after placement -> [CTAs, [(SM, CTAs)]]
            for i, n in enumerate(placed):
                if n:
                    state.used[i] += n
                    bundle = bundles.setdefault(state.used[i], [0, []])
                    bundle[0] += n
                    bundle[1].append((i, n))
            wait_s = _first_wait_s(kernel, state, first_wave=first_wave)
            for occupancy, (n, sms) in bundles.items():
                if kernel.persistent and not first_wave:
                    running.append(env.process(_prefetched_bundle(env, state, n, occupancy, sms, group,
                                                                  kernel.math, freed)))
                    continue
                running.append(env.process(_bundle(env, state, n, occupancy, sms, group, kernel.math, freed,
                                                   strided=kernel.strided, wait_s=wait_s, gemm_derate=derate)))
    if running:
        yield env.all_of(running)


def _first_wait_s(kernel: GpuKernel, state: _Gpu, *, first_wave: bool = True) -> float:
    """What a CTA waits before its bytes flow: one DRAM round trip, or, for a kernel that gives
    its dependent round trips (``round_trips``: a small kernel's latency-bound chain, one entry per
    kernel it stands for), all of them, at L2's latency when its operands are resident, but for
    its ``cold_round_trips`` in the grid's ``first_wave`` (a weight not in L2 until that wave
    reads it), at DRAM's."""
    if not kernel.round_trips:
        return state.latency_s
    if not kernel.resident:
        return sum(kernel.round_trips) * state.latency_s
    cold = kernel.cold_round_trips if first_wave else 0
    return (sum(kernel.round_trips) - cold) * state.l2_latency_s + cold * state.latency_s


def _step_s(state: _Gpu, group: CtaGroup, math: str, occupancy: int) -> float:
    """One CTA's issue time for its whole main loop on an SM it shares with ``occupancy - 1``
    others: tensor FLOPs, special functions (softmax exponentials) and shared-memory operand
    reads, each at the SM's rate split among the resident CTAs. FlashAttention-2 issues its two
    MMAs, the exponentials and the ``ldmatrix`` operand loads from the same warps in program order
    (no warp specialisation: FlashAttention-3 paper, section 3), so they add up, but for the share
    ``attention_overlap`` of the shorter of MMAs and operand reads, which the SM overlaps (each
    warp loads the next k-slice's fragments before the MMAs of this one, and the other resident
    CTA's warps issue while this one's wait); then the DRAM round trips the loop waits on
    (``stall_s``). FlashAttention-3 (``math == "fa3"``) reads its operands from shared memory
    inside ``wgmma`` and its warpgroups keep two pipes going at once, the tensor pipe (MMAs) and
    the XU pipe (one exponential a score): the longer of the two at peak, over the busy share the
    pipe law leaves it at their ratio (``Gpu.fa3_pipe_busy``) and over the tensor pipe's share of
    peak the SMs sustain (``gemm_tensor``, the same ``wgmma`` at the same clock)."""
    if math not in state.sm_flops:
        return 0.0
    mma = group.flops / (state.sm_flops[math] / occupancy)
    if math == "fa3":  # warp-specialised: the tensor and XU pipes busy at once, the longer the bound
        share = state.sm_flops[math] / state.sm_tensor_peak
        mma *= share  # at peak
        sfu = group.sfu / (state.sm_sfu / occupancy) if state.sm_sfu else 0.0
        longer, shorter = max(mma, sfu), min(mma, sfu)
        busy = state.fa3_pipe_busy(shorter / longer) if longer > 0 else 1.0
        return longer / (busy * share) + group.stall_s
    step = mma
    if group.sfu and state.sm_sfu:
        step += group.sfu / (state.sm_sfu / occupancy)
    if group.smem_bytes and state.sm_smem:
        smem = group.smem_bytes / (state.sm_smem / occupancy)
        step += smem - state.attention_overlap * min(mma, smem)
    return step + group.stall_s


def _bundle(env: simpy.Environment, state: _Gpu, n: int, occupancy: int, sms: list[tuple[int, int]],
            group: CtaGroup, math: str, freed: list[simpy.Event], *, strided: bool = False,
            wait_s: float | None = None, gemm_derate: float = 1.0) -> Generator:
    """``n`` identical CTAs, each on an SM holding ``occupancy`` CTAs, through their main loop.

    One DRAM round trip fills the pipeline and the first step's loads are exposed; then the
    loads of steps 2..T overlap the math of steps 1..T-1; the last step's math is exposed.
    With one step: load, then math. A group's ``prologue_bytes`` are read with the first step's
    loads and its ``epilogue_bytes`` written after the last step (FlashAttention's Q and O tiles)."""
    tiles = max(1, group.tiles)
    edges = group.prologue_bytes + group.epilogue_bytes
    load = n * (group.bytes - edges) / tiles
    if math == "gemm":  # TMA tile loads of a GEMM's operands reach less of HBM than a streaming copy
        load /= gemm_derate
    elif strided:  # PyTorch's non-vectorised elementwise path reaches less of HBM than a copy
        load /= state.strided_derate
    l2 = n * group.l2_bytes / tiles if state.l2 is not None else 0.0
    step_s = _step_s(state, group, math, occupancy) / tiles
    if group.bytes > 0:
        yield delay(env, state.latency_s if wait_s is None else wait_s)
        first = [state.hbm.transfer(load + n * group.prologue_bytes, n)]
        if l2 > 0:
            first.append(state.l2.transfer(l2, n))
        yield env.all_of(first)
    if tiles > 1:
        flows = [state.hbm.transfer(load * (tiles - 1), n)]
        if l2 > 0:
            flows.append(state.l2.transfer(l2 * (tiles - 1), n))
        if step_s > 0:
            flows.append(delay(env, step_s * (tiles - 1)))
        yield env.all_of(flows)
    if step_s > 0:
        yield delay(env, step_s)
    if math == "gemm" and state.gemm_step_s > 0:  # per-step barrier cost the pipeline does not hide
        yield delay(env, tiles * state.gemm_step_s)
    if group.epilogue_bytes > 0:  # the output tile, stored once the main loop is done
        yield state.hbm.transfer(n * group.epilogue_bytes, n)
    _free(env, state, sms, freed)


def _prefetched_bundle(env: simpy.Environment, state: _Gpu, n: int, occupancy: int, sms: list[tuple[int, int]],
                       group: CtaGroup, math: str, freed: list[simpy.Event]) -> Generator:
    """``n`` tiles of a persistent kernel (``GpuKernel.persistent``) that are not their SM's first.
    Its producer issued the tile's ``prefetch_bytes`` before the tile ahead of it stored its output
    (FA3: Q and the first K block); the rest waits for the shared memory that output leaves (FA3's
    ``smem_o`` aliases ``smem_v``: the producer waits on ``barrier_O`` before its V loads, hopper/
    mainloop_fwd_sm90_tma_gmma_ws.hpp), so the prefetched bytes land within one DRAM round trip of
    the store, the first key block's remaining loads are exposed, then the later blocks' loads
    overlap the math as in ``_bundle``, the last block's math is exposed and the output stored."""
    steps = max(1, group.tiles)
    step_s = _step_s(state, group, math, occupancy) / steps
    pre = n * group.prefetch_bytes
    rest = max(0.0, n * (group.bytes - group.epilogue_bytes) - pre)
    yield env.all_of([delay(env, state.latency_s), state.hbm.transfer(pre, n)])
    yield state.hbm.transfer(rest / steps, n)
    body = [state.hbm.transfer(rest - rest / steps, n)]
    if state.l2 is not None and group.l2_bytes > 0:
        body.append(state.l2.transfer(n * group.l2_bytes, n))
    if step_s > 0:
        body.append(delay(env, step_s * (steps - 1)))
    yield env.all_of(body)
    if step_s > 0:
        yield delay(env, step_s)
    if group.epilogue_bytes > 0:
        yield state.hbm.transfer(n * group.epilogue_bytes, n)
    _free(env, state, sms, freed)


def _free(env: simpy.Environment, state: _Gpu, sms: list[tuple[int, int]], freed: list[simpy.Event]) -> None:
    """Give the bundle's SM slots back and wake the block scheduler."""
    for i, k in sms:
        state.used[i] -= k
    event, freed[0] = freed[0], env.event()
    event.succeed()
