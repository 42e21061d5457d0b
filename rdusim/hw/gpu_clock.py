"""The SM clock under the board power limit: per-kernel power at full clock and a per-GPU controller.

Owns: ``kernel_power_w``, ``clock_scale``, ``SmClock`` (its ``run_kernel``: one kernel at the
clock), ``SlewSmClock`` (a second controller structure, same interface; opt-in). Imports: config. Never simulates (the engine, ``rdusim.sim.gpu``, drives ``SmClock`` at
kernel boundaries).

Run v (``benchmarks/gpu/h100-20261125v-clock-*``, docs/gpu.md "The SM clock under sustained
load") measured eight workloads, one kernel class each. The model takes from it:

- **Power at full clock, per class.** A workload under the limit gives its power; one over it
  gives its steady slowdown s (full over steady clock), and its power at full clock is then
  ``idle + (limit - idle) x s`` (power linear in the clock above idle [A]; at the steady clock it
  draws the limit). Between shapes, within a class, the power above idle scales with the kernel's
  achieved rate against its class's anchor (tensor FLOP/s for GEMMs and attention; for attention
  the anchor is run v's FA2 prefill of the nearest length at or below the kernel's longest key
  span, the shortest above it where none is); every kernel draws at least the streaming copy's
  power at its DRAM rate (the memory anchor, same scaling). Collectives and gaps draw ``idle``.
  One linear model across classes fails (docs: the GEMM would draw over 1.5 kW), so none is used.
- **The controller.** A running average of that full-clock power, time constant
  ``fall_window`` while the power is above the average and ``rise_window`` while it is below;
  the clock is ``(limit - idle) / (average - idle)`` of full, at most full.
- **Time against clock, per class** (run v's bin table): attention 1/f; a GEMM max(1, knee / f)
  (flat to ``gemm_knee`` of full clock, 1/f below); anything else (streaming, collectives) none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rdusim.config.schema import GpuClockAnchorSpec, GpuClockAttentionAnchorSpec, GpuClockSpec

#: the longest stretch of full-clock work run at one clock: a long kernel (FA2 at 128K: 0.4 s) is
#: cut into pieces this long, so the clock moves within it as at CTA-bundle boundaries
STEP_S = 1e-3


def _anchor_w(spec: GpuClockSpec, a: GpuClockAnchorSpec, exponent: float = 1.0) -> float:
    """An anchor's power at full clock; one given as a slowdown s drew the limit at 1/s of the
    clock, so with power above idle as clock^exponent it draws ``idle + (limit - idle) x s^exponent``."""
    if a.power_w is not None:
        return a.power_w
    assert a.slowdown is not None
    return spec.idle_w + (spec.power_limit_w - spec.idle_w) * a.slowdown**exponent


def _scaled_w(
    spec: GpuClockSpec, a: GpuClockAnchorSpec, rate: float, exponent: float = 1.0
) -> float:
    return spec.idle_w + (_anchor_w(spec, a, exponent) - spec.idle_w) * rate / a.rate


#: the attention kernels' math classes (``GpuKernel.math``): FlashAttention-2 and FlashMLA draw power
#: by their tensor rate against the measured FA2 anchors (its key span's) and run at the
#: controller's clock (compute-bound)
ATTENTION_CLASSES = ("attention", "mla")
#: the classes priced as cuBLAS's GEMMs: the GEMM itself and FlashAttention-3, which issues the same
#: ``wgmma`` on the same SMs at the GEMMs' tensor share (``Gpu.math_flops_per_s``): power by the
#: tensor rate against the GEMM anchor, time flat to ``gemm_knee`` of full clock. (Against FA2's
#: anchors, FA3 at 2.2x FA2's rate drew twice FA2's power above idle and ran at half the clock;
#: run bq measured its long kernels 4-7% slower back to back than at full clock: docs/gpu.md.)
GEMM_CLASSES = ("gemm", "fa3")


def _attention_anchor(spec: GpuClockSpec, keys: int) -> GpuClockAttentionAnchorSpec:
    below = [a for a in spec.attention if a.tokens <= keys]
    return below[-1] if below else spec.attention[0]


def kernel_power_w(
    spec: GpuClockSpec,
    math_class: str,
    flops: float,
    nbytes: float,
    seconds: float,
    keys: int = 0,
    exponent: float = 1.0,
) -> float:
    """Board power (W) a kernel of ``math_class`` would draw at full clock, moving ``flops`` and
    ``nbytes`` in ``seconds`` (its full-clock time); ``keys``: an attention kernel's longest key
    span; ``exponent``: power above idle as clock^exponent (1: the frozen controller's)."""
    if seconds <= 0 or math_class == "nvlink":
        return spec.idle_w
    power = _scaled_w(spec, spec.memory, nbytes / seconds, exponent)
    if math_class in GEMM_CLASSES:
        power = max(power, _scaled_w(spec, spec.gemm, flops / seconds, exponent))
    elif math_class in ATTENTION_CLASSES:
        anchor = _attention_anchor(spec, keys)
        power = max(power, _scaled_w(spec, anchor, flops / seconds, exponent))
    return power


def clock_scale(spec: GpuClockSpec, math_class: str, share: float) -> float:
    """A kernel's time at clock ``share`` of full over its time at full clock."""
    if share >= 1.0:
        return 1.0
    if math_class in ATTENTION_CLASSES:
        return 1.0 / share
    if math_class in GEMM_CLASSES:
        return max(1.0, spec.gemm_knee / share)
    return 1.0


@dataclass
class SmClock:
    """One GPU's controller state: the running average of full-clock power (starts idle: a cold GPU)."""

    spec: GpuClockSpec
    #: the running average of full-clock power (W); None: start idle
    average_w: float | None = None

    def __post_init__(self) -> None:
        if self.average_w is None:
            self.average_w = self.spec.idle_w

    @property
    def share(self) -> float:
        """The clock now, as a share of full."""
        spec = self.spec
        assert self.average_w is not None
        over = self.average_w - spec.idle_w
        head = spec.power_limit_w - spec.idle_w
        return 1.0 if over <= head else head / over

    def _average(self, seconds: float, power_w: float) -> None:
        assert self.average_w is not None
        tau = self.spec.fall_window_s if power_w > self.average_w else self.spec.rise_window_s
        self.average_w = power_w + (self.average_w - power_w) * math.exp(-seconds / tau)

    def idle(self, seconds: float) -> None:
        """Nothing runs for ``seconds`` (a host gap, a launch): the GPU draws idle power."""
        if seconds > 0:
            self._average(seconds, self.spec.idle_w)

    def run(self, full_s: float, power_w: float, math_class: str) -> float:
        """A kernel of ``full_s`` seconds at full clock, drawing ``power_w`` there: its time at the
        controller's clock, which moves every ``STEP_S`` of its full-clock work."""
        left, spent = full_s, 0.0
        while left > 1e-15:
            piece = min(left, STEP_S)
            wall = piece * clock_scale(self.spec, math_class, self.share)
            self._average(wall, power_w)
            spent += wall
            left -= piece
        return spent

    def run_kernel(
        self, full_s: float, math_class: str, flops: float, nbytes: float, keys: int = 0
    ) -> float:
        """A kernel of ``math_class`` moving ``flops`` and ``nbytes`` in ``full_s`` at full clock
        (``keys``: an attention kernel's key span): its time at the controller's clock, drawing
        ``kernel_power_w`` (the engine's hook, ``rdusim.sim.gpu``, and replays of it)."""
        return self.run(
            full_s, kernel_power_w(self.spec, math_class, flops, nbytes, full_s, keys), math_class
        )


@dataclass
class SlewSmClock(SmClock):
    """A second controller structure (p12clock3; opt-in, not the frozen one; docs/gpu.md, "A
    second controller: symmetric average, clock slew, power as clock^a"). ``SmClock``'s interface
    and ``run``, with its own average, clock and idle:

    - a symmetric running average of full-clock power, one window (``fall_window``): the sub-ms
      dips inside a step count at their weight (the frozen ``rise_window`` held them at the peak);
    - the clock that average allows is ``((limit - idle) / (average - idle))^(1/a)`` of full,
      ``a = power_exponent`` (power above idle as clock^a: C V^2 f with V rising with f);
    - the clock falls to it at once and rises at most ``rise_rate`` (share of full per second):
      run v's recovery after a burst is this slew (the GEMM's 65 ms, the 128K FA2's 22 ms).
    """

    #: the clock now, share of full
    clock: float = 1.0

    def __post_init__(self) -> None:
        if self.spec.rise_rate is None:
            raise ValueError("SlewSmClock needs the clock section's rise_rate")
        super().__post_init__()

    @property
    def share(self) -> float:
        """The clock now, as a share of full."""
        return self.clock

    def _allowed(self) -> float:
        spec = self.spec
        assert self.average_w is not None
        over = self.average_w - spec.idle_w
        head = spec.power_limit_w - spec.idle_w
        return 1.0 if over <= head else (head / over) ** (1.0 / spec.power_exponent)

    def _average(self, seconds: float, power_w: float) -> None:
        assert self.average_w is not None and self.spec.rise_rate is not None
        self.average_w = power_w + (self.average_w - power_w) * math.exp(
            -seconds / self.spec.fall_window_s
        )
        self.clock = min(self._allowed(), self.clock + self.spec.rise_rate * seconds, 1.0)

    def idle(self, seconds: float) -> None:
        """Nothing runs for ``seconds``: idle power, the clock rising at its rate."""
        while seconds > 1e-15:
            piece = min(seconds, STEP_S)
            self._average(piece, self.spec.idle_w)
            seconds -= piece

    def run_kernel(
        self, full_s: float, math_class: str, flops: float, nbytes: float, keys: int = 0
    ) -> float:
        """As ``SmClock.run_kernel``, with the anchors' power at ``power_exponent``."""
        power = kernel_power_w(
            self.spec, math_class, flops, nbytes, full_s, keys, self.spec.power_exponent
        )
        return self.run(full_s, power, math_class)
