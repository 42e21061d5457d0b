"""The engine's GPU target: library kernels run one at a time over a GPU's SMs.

Owns: ``simulate_gpu``. Imports: resources, trace, mapping.gpu, hw.gpu.

A GPU is not a spatial pipeline: it runs one kernel at a time across all of its SMs. Each
kernel is a grid of CTAs (``rdusim.mapping.gpu``); the block scheduler places CTAs on SMs with
a free slot, in launch order, as earlier CTAs finish (waves and tails come out of this).
Every SM has two processor-sharing pools (``BandwidthPool``): its slice of HBM bandwidth
(``hbm / sms``: an SM's outstanding requests bound what it can draw, so a kernel that leaves
SMs idle leaves bandwidth idle) and its slice of the kernel's tensor rate; the CTAs resident
on one SM share them. A CTA waits one DRAM round trip, then runs its main loop with the loads
of the next tile overlapping the math of this one (see ``_bundle``). The launch path decides what a kernel costs before its CTAs
run: ``stream`` (one kernel timed alone), ``graph`` (CUDA graph replay) or ``eager`` (a host
process dispatches every op at ``eager_host`` each and the GPU runs behind it).

Identical CTAs placed on one SM at the same instant move as one bundle (same finish time
under processor sharing), so a wave costs a few events per SM, not per CTA.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import simpy

from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import CtaGroup, GpuKernel
from rdusim.sim.resources import BandwidthPool
from rdusim.sim.trace import KernelRecord, Trace


class _Sm:
    def __init__(self, env: simpy.Environment, index: int, gpu: Gpu) -> None:
        self.hbm = BandwidthPool(env, f"sm{index}.hbm", gpu.hbm_bytes_per_s / gpu.sms)
        self.math = {m: BandwidthPool(env, f"sm{index}.{m}", gpu.math_flops_per_s(m) / gpu.sms)
                     for m in ("gemm", "attention", "mla")}
        self.used = 0
        self.latency_s = gpu.hbm_latency_s


def simulate_gpu(kernels: Sequence[tuple[GpuKernel, int]], gpu: Gpu, *, mode: str = "graph") -> Trace:
    """Run ``kernels`` in order (each ``(kernel, layer)``); the trace has one record per kernel."""
    if mode not in ("graph", "eager", "stream"):
        raise ValueError(f"launch mode must be graph, eager or stream, got {mode!r}")
    env = simpy.Environment()
    sms = [_Sm(env, i, gpu) for i in range(gpu.sms)]
    issued = simpy.Store(env)
    records: list[KernelRecord] = []
    env.process(_host(env, kernels, gpu, mode, issued))
    done = env.process(_device(env, kernels, gpu, mode, sms, issued, records))
    env.run(until=done)
    return Trace(kernels=tuple(records), layers_simulated=len({layer for _, layer in kernels}),
                 event_count=next(env._eid), makespan_s=env.now)


def _host(env: simpy.Environment, kernels: Sequence[tuple[GpuKernel, int]], gpu: Gpu, mode: str,
          issued: simpy.Store) -> Generator:
    """Eager: the host dispatches op by op; graph and stream hand every kernel over at once."""
    for index, (kernel, _) in enumerate(kernels):
        if mode == "eager":
            yield env.timeout(kernel.launches * gpu.launch_s("eager"))
        yield issued.put(index)


def _device(env: simpy.Environment, kernels: Sequence[tuple[GpuKernel, int]], gpu: Gpu, mode: str,
            sms: list[_Sm], issued: simpy.Store, records: list[KernelRecord]) -> Generator:
    gap = {"graph": gpu.launch_s("graph"), "stream": gpu.launch_s("stream"), "eager": 0.0}[mode]
    for kernel, layer in kernels:
        yield issued.get()
        start = env.now
        overhead = gap * kernel.launches
        yield env.timeout(overhead)
        if kernel.math == "nvlink":
            yield env.timeout(kernel.ctas * gpu.nvlink_latency_s + kernel.bytes / gpu.nvlink_bytes_per_s)
        else:
            yield from _run_grid(env, kernel, sms)
        records.append(KernelRecord(
            kernel=kernel.name, layer_type=kernel.math, layer=layer, start_s=start, end_s=env.now,
            overhead_s=overhead, stage_busy_s={}, stage_pcus={}, pool_busy_s={},
            pool_bytes={"hbm": kernel.bytes, "flops": kernel.flops},
        ))


def _run_grid(env: simpy.Environment, kernel: GpuKernel, sms: list[_Sm]) -> Generator:
    """Place the grid's CTAs on free SM slots in launch order; return when all have finished."""
    freed = [env.event()]
    running: list[simpy.Process] = []
    for group in kernel.groups:
        left = group.count
        while left:
            free = [sm for sm in sms if sm.used < kernel.ctas_per_sm]
            if not free:
                yield freed[0]
                continue
            # the block scheduler fills the emptiest SMs first, one CTA per SM per round
            free.sort(key=lambda sm: sm.used)
            place: dict[int, int] = {}
            capacity = sum(kernel.ctas_per_sm - sm.used for sm in free)
            take = min(left, capacity)
            while take:
                for sm in free:
                    if take and sm.used + place.get(id(sm), 0) < kernel.ctas_per_sm:
                        place[id(sm)] = place.get(id(sm), 0) + 1
                        take -= 1
            for sm in free:
                n = place.get(id(sm), 0)
                if n:
                    sm.used += n
                    left -= n
                    running.append(env.process(_bundle(env, sm, n, group, kernel.math, freed)))
    if running:
        yield env.all_of(running)


def _bundle(env: simpy.Environment, sm: _Sm, n: int, group: CtaGroup, math: str,
            freed: list[simpy.Event]) -> Generator:
    """``n`` identical CTAs on one SM running their main loop of ``group.tiles`` steps.

    One DRAM round trip fills the pipeline and the first step's loads are exposed; then the
    loads of steps 2..T overlap the math of steps 1..T-1 (double buffering); the last step's
    math is exposed. With one step: load, then math.
    """
    tiles = max(1, group.tiles)
    load, work = n * group.bytes / tiles, n * group.flops / tiles
    pool = sm.math.get(math)
    if group.bytes > 0:
        yield env.timeout(sm.latency_s)
        yield sm.hbm.transfer(load)
    if tiles > 1:
        flows = [sm.hbm.transfer(load * (tiles - 1))]
        if work > 0 and pool is not None:
            flows.append(pool.transfer(work * (tiles - 1)))
        yield env.all_of(flows)
    if work > 0 and pool is not None:
        yield pool.transfer(work)
    sm.used -= n
    event, freed[0] = freed[0], env.event()
    event.succeed()
