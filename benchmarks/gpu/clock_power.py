"""The SM clock and board power under sustained load, per kernel class (P12, issue 17; run v).

    python benchmarks/gpu/clock_power.py OUT_DIR            # on the GPU (about 2 minutes)
    python benchmarks/gpu/clock_power.py --dry-run          # the rows, without a GPU
    python benchmarks/gpu/clock_power.py --analyse PREFIX   # tables and the plot from PREFIX-*.csv (CPU)

Eight workloads, each a kernel class: FA2 causal prefill through SDPA's FlashAttention backend
(batch 1, 32 x 8 heads, head_dim 128) at 4K, 16K and 128K tokens, and at 16K with head_dim 64
and 256 (less and more shared-memory traffic per FLOP, other tiles); a bf16 GEMM 8192^3; a
device-to-device copy of 1 GiB (memory-bound); a decode-step-like mix (a CUDA graph of four
Llama-3.1-8B layers at batch 64 x 4096 keys: the GEMMs, FA2 one-split decode, the elementwise
ops). Each is run

  (a) ``cold``: three single calls, each after >= 1.2 s of idle GPU;
  (b) ``burst``: back to back for >= 3 s (at least 4 calls), a probe after each, after >= 1.2 s idle;
  (c) ``recovery``: right after the burst, only clock probes (below) for about 0.45 s.

and two crossed rows reproduce the sweep's situation (a short row right after a long one): 30
calls of the 4K prefill right after a 128K burst, and right after a GEMM burst; and the GEMM
burst is repeated for 8 s at the end (does the steady clock drift as the die warms?).

The clock is read two ways. A probe (``torch.cuda._sleep``: a one-thread kernel that spins for a
number of SM clock cycles, ``clock64``) runs between calls; timed between CUDA events it gives
the SM clock at that instant, cycles / (elapsed - the event overhead), the overhead fitted at the
start from two probe lengths. Every call and every probe lies between two CUDA events; each
phase anchors its first event to ``time.perf_counter`` after a synchronize, so call times, probe
clocks and NVML samples share one time axis. A separate process polls NVML every 5 ms (the SM
and memory clocks, the instantaneous and the 1 s averaged board power, the temperature, the
clock-event ("throttle") reasons) and, at the end, reads the driver's own sample buffers of SM
clock and power. Without pynvml it runs ``nvidia-smi ... -lms 10`` instead.

Files (OUT_DIR): ``events.csv`` (every call and probe: workload, phase, kind, index, start s,
duration us, probe clock MHz), ``nvml.csv`` (the poll), ``nvmlbuf.csv`` (the driver's buffers),
``summary.csv`` (one row per workload and phase), ``log.txt`` is the caller's.
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing as mp
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PROBE_CYCLES = 40_000        # ~20 us at 1980 MHz: long beside the event overhead, short beside a call
PROBE_SHORT, PROBE_LONG = 20_000, 80_000   # the overhead fit's two lengths
IDLE_S = 1.2                 # idle before a cold call or a burst ("after >= 1 s idle")
BURST_S = 3.0                # the sweep's longest back-to-back rows were 0.3-2.6 s (docs/gpu.md)
RECOVERY_CYCLES, RECOVERY_PROBES = 100_000, 9_000   # ~0.45 s of probes after a burst (~50 us each)
LEAD_CYCLES = 2_000_000      # ~1 ms lead after an idle gap (see Timeline.idle)
POLL_S = 0.005
# NVML's clock-event reason bits (nvml.h, nvmlClocksEventReason*; the same as the older
# nvmlClocksThrottleReason* names).
REASONS = {0x1: "gpu_idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
           0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}
NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT = 185, 186   # nvml.h field ids


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str          # kernel class: attention | gemm | memory | mix
    what: str
    flops: float       # per call
    bytes: float       # DRAM bytes per call, compulsory
    seq: int = 0       # attention rows: tokens and head_dim
    hd: int = 0


def _prefill(seq: int, hd: int = 128) -> Workload:
    hq, hkv = 32, 8
    return Workload(f"fa2_prefill_{seq // 1024}k" + ("" if hd == 128 else f"_hd{hd}"), "attention",
                    f"SDPA flash, causal, batch 1, {hq} x {hkv} heads, hd {hd}, {seq} tokens",
                    4 * seq * seq * hd * hq / 2, 2 * seq * hd * (2 * hq + 2 * hkv), seq, hd)


MIX_LAYERS, MIX_BATCH, MIX_KV, HIDDEN, FFN = 4, 64, 4096, 4096, 14336
_MIX_W = (6144 + 4096 + 2 * FFN + FFN) * HIDDEN * 2
_MIX_KV = 2 * MIX_BATCH * 8 * MIX_KV * 128 * 2
WORKLOADS = (
    _prefill(4096), _prefill(16384), _prefill(131072), _prefill(16384, 64), _prefill(16384, 256),
    Workload("gemm_8192", "gemm", "bf16 matmul 8192 x 8192 x 8192, random data", 2 * 8192 ** 3, 3 * 8192 * 8192 * 2),
    Workload("copy_1g", "memory", "device-to-device copy_ of 1 GiB (bf16)", 0.0, 2 * (1 << 30)),
    Workload("decode_mix", "mix", f"CUDA graph of {MIX_LAYERS} Llama-3.1-8B layers, batch {MIX_BATCH} x {MIX_KV} keys "
             "(RMSNorm, qkv, FA2 one-split decode, o, gate_up, SiLU-mul, down)",
             MIX_LAYERS * MIX_BATCH * 2 * (_MIX_W / 2 + 2 * 32 * MIX_KV * 128), MIX_LAYERS * (_MIX_W + _MIX_KV)),
)
CROSS = (("fa2_prefill_4k", "fa2_prefill_128k"), ("fa2_prefill_4k", "gemm_8192"))
LONG = ("gemm_8192", 8.0)


def plan() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for w in WORKLOADS:
        for phase, what in (("cold", f"3 single calls, each after {IDLE_S} s idle"),
                            ("burst", f"back to back >= {BURST_S} s after {IDLE_S} s idle, a probe after every call"),
                            ("recovery", f"{RECOVERY_PROBES} probes of {RECOVERY_CYCLES} cycles right after the burst")):
            rows.append({"workload": w.name, "class": w.kind, "phase": phase, "what": what, "shape": w.what,
                         "gflop_per_call": round(w.flops / 1e9, 1), "dram_mb_per_call": round(w.bytes / 1e6, 1)})
    for short, long_ in CROSS:
        rows.append({"workload": short, "class": "attention", "phase": f"after_{long_}",
                     "what": f"30 calls right after a {BURST_S} s burst of {long_}", "shape": "", "gflop_per_call": "",
                     "dram_mb_per_call": ""})
    rows.append({"workload": LONG[0], "class": "gemm", "phase": "long_burst",
                 "what": f"back to back {LONG[1]} s after {IDLE_S} s idle", "shape": "", "gflop_per_call": "",
                 "dram_mb_per_call": ""})
    return rows


# --------------------------------------------------------------------------- the NVML sampler
def _sampler(path: str, bus_id: str, uuid: str, stop, ready) -> None:  # type: ignore[no-untyped-def]
    """Poll NVML every POLL_S into ``path`` until ``stop`` is set; then dump the driver's buffers."""
    import pynvml as N

    N.nvmlInit()
    h = None
    for how, get in (("uuid", lambda: N.nvmlDeviceGetHandleByUUID(uuid)),
                     ("pci", lambda: N.nvmlDeviceGetHandleByPciBusId(bus_id)),
                     ("index0", lambda: N.nvmlDeviceGetHandleByIndex(0))):
        try:
            h = get()
            print(f"nvml handle by {how}: {N.nvmlDeviceGetName(h)}", flush=True)
            break
        except Exception as exc:  # noqa: BLE001 - try the next way
            print(f"nvml handle by {how} failed: {exc}", flush=True)
    reasons = getattr(N, "nvmlDeviceGetCurrentClocksEventReasons", None) or N.nvmlDeviceGetCurrentClocksThrottleReasons

    def field(v) -> float:  # type: ignore[no-untyped-def]
        if v.nvmlReturn != 0:
            return float("nan")
        t = v.valueType
        val = (v.value.dVal if t == 0 else v.value.uiVal if t == 1 else v.value.ulVal if t == 2
               else v.value.ullVal if t == 3 else v.value.sllVal if t == 4 else v.value.siVal)
        return val / 1000.0
    try:
        limit = N.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
    except Exception:  # noqa: BLE001
        limit = float("nan")
    t_wall0 = time.time()
    rows = []
    ready.set()
    nxt = time.perf_counter()
    while not stop.is_set():
        t = time.perf_counter()
        fv = N.nvmlDeviceGetFieldValues(h, [NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_AVERAGE])
        rows.append((t, N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM), N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_MEM),
                     field(fv[0]), field(fv[1]), N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU), reasons(h),
                     time.perf_counter() - t))
        nxt += POLL_S
        time.sleep(max(0.0, nxt - time.perf_counter()))
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "sm_mhz", "mem_mhz", "power_instant_w", "power_avg_w", "temp_c", "reasons", "read_s",
                    "power_limit_w", "wall0"])
        for r in rows:
            w.writerow([f"{r[0]:.6f}", r[1], r[2], f"{r[3]:.2f}", f"{r[4]:.2f}", r[5], r[6], f"{r[7]:.6f}",
                        f"{limit:.1f}", f"{t_wall0:.6f}"])
    # The driver's own sample buffers (timestamps in us on the driver's clock; wall/perf at the read to align).
    buf = path.replace("nvml.csv", "nvmlbuf.csv")
    with open(buf, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["what", "driver_ts_us", "value", "read_wall_s", "read_perf_s"])
        for what, st in (("power_mw", 0), ("sm_mhz", 5)):   # NVML_TOTAL_POWER_SAMPLES, NVML_PROCESSOR_CLK_SAMPLES
            try:
                _vt, samples = N.nvmlDeviceGetSamples(h, st, 0)
                wall, perf = time.time(), time.perf_counter()
                for s in samples:
                    v = s.sampleValue
                    w.writerow([what, s.timeStamp, getattr(v, "uiVal", getattr(v, "ulVal", 0)), f"{wall:.6f}", f"{perf:.6f}"])
            except Exception as exc:  # noqa: BLE001 - optional
                w.writerow([what, "", f"unavailable: {exc}", "", ""])
    N.nvmlShutdown()


class Sampler:
    """NVML in its own process (no GIL shared with the launching loop); nvidia-smi without pynvml."""

    def __init__(self, out: Path, bus_id: str, uuid: str) -> None:
        self.out, self.proc, self.smi = out, None, None
        try:
            import pynvml  # noqa: F401
            ctx = mp.get_context("spawn")
            self.stop, ready = ctx.Event(), ctx.Event()
            self.proc = ctx.Process(target=_sampler, args=(str((out / "nvml.csv").resolve()), bus_id, uuid, self.stop, ready))
            self.proc.start()
            ready.wait(30)
        except ImportError:
            import subprocess
            print("pynvml missing: nvidia-smi -lms 10 instead", flush=True)
            self.log = (out / "nvml.csv").open("w")
            self.t0 = time.perf_counter()
            self.smi = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw.instant,power.draw.average,"
                 "temperature.gpu,clocks_event_reasons.active", "--format=csv,noheader", "-lms", "10"], stdout=self.log)

    def close(self) -> None:
        if self.proc is not None:
            self.stop.set()
            self.proc.join(60)
        if self.smi is not None:
            self.smi.terminate()
            self.smi.wait(10)
            self.log.close()
            (self.out / "nvml-anchor.txt").write_text(f"perf_counter at start {self.t0:.6f}, wall {time.time():.6f}\n")


# --------------------------------------------------------------------------- the GPU side
class Timeline:
    """A chain of CUDA events on the current stream; each interval is one call or one probe."""

    def __init__(self, torch) -> None:  # type: ignore[no-untyped-def]
        self.torch = torch
        torch.cuda.synchronize()
        self.ref = torch.cuda.Event(enable_timing=True)
        self.ref.record()
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()
        self.marks: list[tuple[str, int, object, object]] = []   # (kind, index, start event, end event)
        self.last = self.ref

    def follow(self) -> Timeline:
        """A second chain that starts at this one's last event (same time anchor)."""
        t = Timeline.__new__(Timeline)
        t.torch, t.ref, t.t0, t.marks, t.last = self.torch, self.ref, self.t0, [], self.last
        return t

    def _ev(self):  # type: ignore[no-untyped-def]
        e = self.torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def run(self, kind: str, index: int, fn) -> None:  # type: ignore[no-untyped-def]
        start = self.last
        fn()
        self.last = self._ev()
        self.marks.append((kind, index, start, self.last))

    def probe(self, index: int, cycles: int = PROBE_CYCLES) -> None:
        self.run(f"probe{cycles}", index, lambda: self.torch.cuda._sleep(cycles))

    def idle(self, seconds: float) -> None:
        """Leave the GPU idle: synchronize, sleep on the host, restart the chain with a lead probe
        (LEAD_CYCLES on one SM, about 1 ms: near-idle power) so that the host is ahead of the GPU
        again before the next timed interval."""
        self.torch.cuda.synchronize()
        time.sleep(seconds)
        self.last = self._ev()
        self.probe(-1, LEAD_CYCLES)

    def rows(self, workload: str, phase: str, overhead_us: float) -> list[dict[str, object]]:
        self.torch.cuda.synchronize()
        out = []
        for kind, index, s, e in self.marks:
            t = self.t0 + self.ref.elapsed_time(s) * 1e-3
            us = s.elapsed_time(e) * 1e3
            mhz = ""
            if kind.startswith("probe"):
                mhz = f"{int(kind[5:]) / (us - overhead_us):.1f}" if us > overhead_us else ""
            out.append({"workload": workload, "phase": phase, "kind": kind, "index": index, "t": f"{t:.6f}",
                        "us": f"{us:.3f}", "probe_mhz": mhz})
        return out


def build(torch, w: Workload):  # type: ignore[no-untyped-def]
    """The workload's one call (a closure) with its tensors allocated and warmed."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    bf, dev = torch.bfloat16, torch.device("cuda")
    if w.kind == "attention":
        q = torch.randn(1, 32, w.seq, w.hd, dtype=bf, device=dev)
        k = torch.randn(1, 8, w.seq, w.hd, dtype=bf, device=dev)
        v = torch.randn(1, 8, w.seq, w.hd, dtype=bf, device=dev)

        def fn() -> None:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    elif w.kind == "gemm":
        a = torch.randn(8192, 8192, dtype=bf, device=dev)
        b = torch.randn(8192, 8192, dtype=bf, device=dev)
        c = torch.empty(8192, 8192, dtype=bf, device=dev)

        def fn() -> None:
            torch.matmul(a, b, out=c)
    elif w.kind == "memory":
        src = torch.randn(1 << 29, dtype=bf, device=dev)
        dst = torch.empty_like(src)

        def fn() -> None:
            dst.copy_(src)
    else:
        fn = _decode_mix(torch, F, sdpa_kernel, SDPBackend)
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    return fn


def _decode_mix(torch, F, sdpa_kernel, SDPBackend):  # type: ignore[no-untyped-def]
    bf, dev = torch.bfloat16, torch.device("cuda")
    b = MIX_BATCH
    layers = []
    for _ in range(MIX_LAYERS):
        layers.append({
            "norm": torch.ones(HIDDEN, dtype=bf, device=dev),
            "qkv": torch.randn(HIDDEN, 6144, dtype=bf, device=dev) * 0.02,
            "o": torch.randn(HIDDEN, HIDDEN, dtype=bf, device=dev) * 0.02,
            "gu": torch.randn(HIDDEN, 2 * FFN, dtype=bf, device=dev) * 0.02,
            "down": torch.randn(FFN, HIDDEN, dtype=bf, device=dev) * 0.02,
            "k": torch.randn(b, 8, MIX_KV, 128, dtype=bf, device=dev),
            "v": torch.randn(b, 8, MIX_KV, 128, dtype=bf, device=dev)})
    x0 = torch.randn(b, HIDDEN, dtype=bf, device=dev)

    def step() -> None:
        x = x0
        for L in layers:
            h = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(bf) * L["norm"]
            qkv = h @ L["qkv"]
            q = qkv[:, :HIDDEN].view(b, 32, 1, 128)
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                a = F.scaled_dot_product_attention(q, L["k"], L["v"], enable_gqa=True)
            x = x + a.reshape(b, HIDDEN) @ L["o"]
            gu = x @ L["gu"]
            x = x + (F.silu(gu[:, :FFN]) * gu[:, FFN:]) @ L["down"]

    step()
    torch.cuda.synchronize()
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        torch.cuda.synchronize()
        print("decode_mix: CUDA graph", flush=True)
        return g.replay
    except Exception as exc:  # noqa: BLE001 - eager is still a mix, at lower GPU duty
        print(f"decode_mix: graph capture failed ({exc}); eager", flush=True)
        return step


class Run:
    """One device run: the probe's overhead fit, then every phase; rows collected as they finish."""

    def __init__(self, torch) -> None:  # type: ignore[no-untyped-def]
        self.torch = torch
        self.events: list[dict[str, object]] = []
        self.summary: list[dict[str, object]] = []
        self.fns: dict[str, object] = {}
        self.cold_us: dict[str, float] = {}
        self.overhead = 0.0
        self.t_start = time.perf_counter()

    def calibrate(self) -> None:
        """The probe's event overhead: two lengths, alternating, at a steady (idle) clock."""
        tl = Timeline(self.torch)
        tl.idle(0.0)
        for i in range(100):
            tl.probe(i, PROBE_SHORT)
            tl.probe(i, PROBE_LONG)
        cal = tl.rows("calibration", "probe_fit", 0.0)

        def med(cycles: int) -> float:
            return statistics.median(float(r["us"]) for r in cal if r["kind"] == f"probe{cycles}" and int(r["index"]) >= 5)
        short, long_ = med(PROBE_SHORT), med(PROBE_LONG)
        mhz = (PROBE_LONG - PROBE_SHORT) / (long_ - short)
        self.overhead = short - PROBE_SHORT / mhz
        print(f"probe fit: {short:.3f} us / {long_:.3f} us -> {mhz:.1f} MHz, event overhead {self.overhead:.3f} us",
              flush=True)
        self.events += cal
        self.summary.append({"workload": "calibration", "phase": "probe_fit", "calls": 200, "median_us": "",
                             "probe_mhz_median": f"{mhz:.1f}", "overhead_us": f"{self.overhead:.3f}"})

    def record(self, tl: Timeline, name: str, phase: str) -> list[dict[str, object]]:
        rows = tl.rows(name, phase, self.overhead)
        self.events.extend(rows)
        calls = [float(r["us"]) for r in rows if r["kind"] == "call"]
        probes = [float(r["probe_mhz"]) for r in rows if r["probe_mhz"]]
        self.summary.append({"workload": name, "phase": phase, "calls": len(calls),
                             "median_us": f"{statistics.median(calls):.2f}" if calls else "",
                             "probe_mhz_median": f"{statistics.median(probes):.1f}" if probes else "",
                             "overhead_us": f"{self.overhead:.3f}"})
        print(self.summary[-1], f"({time.perf_counter() - self.t_start:.0f} s)", flush=True)
        return rows

    def burst(self, tl: Timeline, name: str, seconds: float) -> None:
        n = max(4, math.ceil(seconds / (self.cold_us[name] * 1e-6)))
        for i in range(n):
            tl.run("call", i, self.fns[name])
            tl.probe(i)

    def workload(self, name: str) -> None:
        """Cold calls, then a burst and its recovery."""
        tl = Timeline(self.torch)
        for i in range(3):
            tl.idle(IDLE_S)
            tl.probe(i)
            tl.run("call", i, self.fns[name])
            tl.probe(i)
        rows = self.record(tl, name, "cold")
        self.cold_us[name] = statistics.median(float(r["us"]) for r in rows if r["kind"] == "call")
        tl = Timeline(self.torch)
        tl.idle(IDLE_S)
        self.burst(tl, name, BURST_S)
        tl2 = tl.follow()   # enqueued before any synchronize: no host gap after the burst
        for i in range(RECOVERY_PROBES):
            tl2.probe(i, RECOVERY_CYCLES)
        self.record(tl, name, "burst")
        self.record(tl2, name, "recovery")

    def cross(self, short: str, long_: str) -> None:
        """30 calls of ``short`` right after a burst of ``long_`` (the sweep's order of rows)."""
        tl = Timeline(self.torch)
        tl.idle(IDLE_S)
        self.burst(tl, long_, BURST_S)
        tl2 = tl.follow()
        for i in range(30):
            tl2.run("call", i, self.fns[short])
            tl2.probe(i)
        self.record(tl, long_, f"burst_before_{short}")
        self.record(tl2, short, f"after_{long_}")

    def long_burst(self, name: str, seconds: float) -> None:
        tl = Timeline(self.torch)
        tl.idle(IDLE_S)
        self.burst(tl, name, seconds)
        self.record(tl, name, "long_burst")

    def all(self) -> None:
        self.calibrate()
        for w in WORKLOADS:
            try:
                self.fns[w.name] = build(self.torch, w)
            except Exception as exc:  # noqa: BLE001 - keep the other rows
                print(f"{w.name}: build failed: {exc!r}", flush=True)
        for w in WORKLOADS:
            if w.name in self.fns:
                self.workload(w.name)
        for short, long_ in CROSS:
            if short in self.cold_us and long_ in self.cold_us:
                self.cross(short, long_)
        if LONG[0] in self.cold_us:
            self.long_burst(*LONG)


def measure(out: Path) -> int:
    import torch

    props = torch.cuda.get_device_properties(0)
    bus = (f"{getattr(props, 'pci_domain_id', 0):08x}:{getattr(props, 'pci_bus_id', 0):02x}:"
           f"{getattr(props, 'pci_device_id', 0):02x}.0")
    uuid = str(getattr(props, "uuid", ""))
    uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    print(f"device {props.name}, {props.multi_processor_count} SMs, bus {bus}, {uuid}; torch {torch.__version__}",
          flush=True)
    sampler = Sampler(out, bus, uuid)
    run = Run(torch)
    try:
        run.all()
    finally:
        torch.cuda.synchronize()
        time.sleep(0.3)
        sampler.close()
        write_tables(out, run.events, run.summary)
    print(f"done in {time.perf_counter() - run.t_start:.0f} s", flush=True)
    return 0


def write_tables(out: Path, events: list[dict], summary: list[dict]) -> None:
    """``out``/events.csv and ``out``/summary.csv, each only when it has rows (clock_check.py too)."""
    for name, data in (("events.csv", events), ("summary.csv", summary)):
        if data:
            with (out / name).open("w", newline="") as fh:
                wr = csv.DictWriter(fh, fieldnames=list(data[0]))
                wr.writeheader()
                wr.writerows(data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="output directory (on the GPU machine)")
    ap.add_argument("--dry-run", action="store_true", help="list the rows; no GPU")
    ap.add_argument("--analyse", metavar="PREFIX", help="tables and plot from PREFIX-events.csv etc. (CPU)")
    args = ap.parse_args()
    if args.dry_run:
        rows = plan()
        w = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        return 0
    if args.analyse:
        from clock_power_analysis import analyse  # CPU-only; the same directory

        return analyse(args.analyse)
    if not args.out:
        ap.error("OUT_DIR is required unless --dry-run or --analyse")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return measure(out)


if __name__ == "__main__":
    sys.exit(main())
