"""Run ae (P12, issue 17): the SM-clock model's frozen check on one H100, and the clock of calibration rows.

    python benchmarks/gpu/clock_check.py OUT_DIR               # on the GPU (about 2.5 minutes)
    python benchmarks/gpu/clock_check.py --smoke OUT_DIR       # the whole flow on CPU, tiny shapes, fake events
    python benchmarks/gpu/clock_check.py --predict CSV         # the model's predictions (CPU; frozen before the run)
    python benchmarks/gpu/clock_check.py --against CSV PREFIX  # measured (PREFIX-events.csv.gz) against them

Rows never measured before (none of them is run v's): Llama-3.1-8B-shaped prefill steps (32
layers, eager, SDPA's FlashAttention forced as the sweeps do: ``measure.pick_sdpa_backend``) at
4K and 16K tokens, 20 back to back; bf16 GEMMs 8192 x 28672 x 8192 and 4096 x 4096 x 14336
(``F.linear``, m x n x k); FA2 causal prefill at 32K and 64K tokens (batch 1, 32 x 8 heads, hd
128). Each: three cold calls (after 1.2 s idle each), a burst after 1.2 s idle (the steps 20 calls,
the others >= 2 s), then clock probes for 0.3 s. A crossed row: the 8K FA2 prefill 20 times
right after a 32K burst. Then the calibration rows' own structure (``measure.time_fn``: two
warm-ups, one call, then the repetitions a 0.25 s / 0.4 s budget allows, one after another), each
with a probe after every call: the FA2 prefill rows at 16K and 32K in the sweep's order (the
attention fit's two hd-128 rows, cold=True: a 256 MiB flush before each), FA2 one-split decode
(batch 64, 2K keys) and graph decode steps (batch 64 x 2K, 32 x 8K, 1 x 8K keys; cold=False).

The clock probe and the NVML poll are run v's (``clock_power.py``: ``Timeline``, ``Sampler``).
Files: ``events.csv`` (every call and probe), ``summary.csv``, ``nvml.csv``, ``log.txt``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

IDLE_S = 1.2
BURST_S = 2.0
STEP_CALLS = 20
RECOVERY_PROBES = 6_000  # x 100_000 cycles, about 0.3 s
CROSS_CALLS = 20


@dataclass(frozen=True)
class Row:
    name: str
    kind: str  # step | gemm | attention | decode_graph | decode_attn
    phase: str  # sustained (cold + burst) | cal (time_fn's structure)
    tokens: int = 0  # step / attention: tokens; decode: kv keys
    batch: int = 1
    m: int = 0
    n: int = 0
    k: int = 0
    cold: bool = False  # time_fn's flush before each call
    budget_s: float = 0.25
    max_reps: int = 100
    after_idle: bool = (
        False  # calibration rows: 1.2 s idle before this one (else right after the last)
    )


SUSTAINED = (
    Row("prefill_step_4k", "step", "sustained", tokens=4096),
    Row("prefill_step_16k", "step", "sustained", tokens=16384),
    Row("gemm_8192x28672x8192", "gemm", "sustained", m=8192, n=28672, k=8192),
    Row("gemm_4096x4096x14336", "gemm", "sustained", m=4096, n=4096, k=14336),
    Row("fa2_prefill_32k", "attention", "sustained", tokens=32768),
    Row("fa2_prefill_64k", "attention", "sustained", tokens=65536),
)
CROSS = (Row("fa2_prefill_8k", "attention", "cross", tokens=8192), "fa2_prefill_32k")
CALIBRATION = (  # in this order; the two prefill rows and decode attention in the sweep's order
    Row("cal_gemm_square8192", "gemm", "cal", m=8192, n=8192, k=8192, cold=True),
    Row("cal_attn_prefill_16k", "attention", "cal", tokens=16384, cold=True, after_idle=True),
    Row("cal_attn_prefill_32k", "attention", "cal", tokens=32768, cold=True),
    Row("cal_attn_decode_b64_l2048", "decode_attn", "cal", tokens=2048, batch=64, cold=True),
    Row(
        "cal_decode_step_b64_l2048_graph",
        "decode_graph",
        "cal",
        tokens=2048,
        batch=64,
        budget_s=0.4,
        max_reps=50,
        after_idle=True,
    ),
    Row(
        "cal_decode_step_b32_l8192_graph",
        "decode_graph",
        "cal",
        tokens=8192,
        batch=32,
        budget_s=0.4,
        max_reps=50,
    ),
    Row(
        "cal_decode_step_b1_l8192_graph",
        "decode_graph",
        "cal",
        tokens=8192,
        batch=1,
        budget_s=0.4,
        max_reps=50,
    ),
)


def _tiny(r: Row) -> Row:
    from dataclasses import replace

    return replace(
        r,
        tokens=min(r.tokens, 64) if r.tokens else 0,
        batch=min(r.batch, 2),
        m=min(r.m, 64),
        n=min(r.n, 128),
        k=min(r.k, 64),
    )


# --------------------------------------------------------------------------- the GPU side
class _FakeEvent:
    def __init__(self, **_: object) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, other: _FakeEvent) -> float:
        return (other.t - self.t) * 1e3


class _FakeCuda:
    Event = _FakeEvent

    @staticmethod
    def synchronize() -> None:
        pass

    @staticmethod
    def _sleep(cycles: int) -> None:
        end = time.perf_counter() + cycles / 2e9
        while time.perf_counter() < end:
            pass


class _FakeTorch:
    cuda = _FakeCuda


def build(torch, M, r: Row, smoke: bool):  # type: ignore[no-untyped-def]
    """The row's one call (a closure), tensors allocated and warmed."""
    import torch.nn.functional as F

    bf, dev = torch.bfloat16, torch.device("cpu" if smoke else "cuda")
    if smoke:
        r = _tiny(r)
    hq, hkv, hd = (4, 2, 16) if smoke else (32, 8, 128)
    if r.kind == "step":
        s = M.TINY_LLAMA if smoke else M.LlamaShape()
        model = M.Llama(s, dev) if smoke else _one_layer_model(torch, M, s, dev)
        ck = [
            torch.empty(1, s.kv_heads, r.tokens, s.head_dim, dtype=bf, device=dev)
            for _ in range(s.layers)
        ]
        cv = [torch.empty_like(c) for c in ck]
        tokens = torch.randint(0, s.vocab, (1, r.tokens), device=dev)
        pos = torch.arange(r.tokens, device=dev)
        cos, sin = M.rope_tables(s, pos)

        def fn() -> None:
            model.forward(tokens, ck, cv, pos, cos, sin, prefill=True)
    elif r.kind == "gemm":
        x = torch.randn(r.m, r.k, dtype=bf, device=dev)
        w = torch.randn(r.n, r.k, dtype=bf, device=dev)

        def fn() -> None:
            F.linear(x, w)
    elif r.kind == "attention":
        q = torch.randn(1, hq, r.tokens, hd, dtype=bf, device=dev)
        k = torch.randn(1, hkv, r.tokens, hd, dtype=bf, device=dev)
        v = torch.randn_like(k)

        def fn() -> None:
            M.sdpa(q, k, v, True)
    elif r.kind == "decode_attn":
        q = torch.randn(r.batch, hq, 1, hd, dtype=bf, device=dev)
        k = torch.randn(r.batch, hkv, r.tokens, hd, dtype=bf, device=dev)
        v = torch.randn_like(k)

        def fn() -> None:
            M.sdpa(q, k, v, False)
    else:  # decode_graph: measure.py's decode step, captured
        s = M.TINY_LLAMA if smoke else M.LlamaShape()
        ctx = M.Ctx(device=dev, tiny=smoke)
        model = M.Llama(s, dev) if smoke else _one_layer_model(torch, M, s, dev)
        step = M.decode_step(ctx, model, r.batch, r.tokens)
        fn = step if smoke else _graph_call(M, ctx, step)

    for _ in range(2):
        fn()
    if not smoke:
        torch.cuda.synchronize()
    return fn


def _graph_call(M, ctx, step):  # type: ignore[no-untyped-def]
    """``step`` captured; the closure keeps ``step`` (its input tensors) alive with the graph (run
    ae's build kept only ``g.replay``: the inputs were freed and the replays read reused memory)."""
    graph = M.capture(ctx, step)

    def fn() -> None:
        graph.replay()

    fn.step = step  # type: ignore[attr-defined]
    return fn


def _one_layer_model(torch, M, s, dev):  # type: ignore[no-untyped-def]
    """Llama-3.1-8B shapes; one layer's weights shared by all 32 (each layer's 436 MB is past L2
    anyway, so every layer streams its weights from HBM as with 32 copies; 16 GB less to fill)."""
    one = M.Llama(M.LlamaShape(layers=1), dev)
    model = M.Llama.__new__(M.Llama)
    model.s, model.norm, model.lm_head, model.embed = s, one.norm, one.lm_head, one.embed
    model.layers = one.layers * s.layers
    return model


class Check:
    def __init__(self, torch, M, cp, smoke: bool) -> None:  # type: ignore[no-untyped-def]
        self.torch, self.M, self.cp, self.smoke = torch, M, cp, smoke
        self.ct = _FakeTorch() if smoke else torch  # what Timeline times with
        self.events: list[dict[str, object]] = []
        self.summary: list[dict[str, object]] = []
        self.overhead = 0.0
        self.t_start = time.perf_counter()
        self.idle_s = 0.01 if smoke else IDLE_S
        self.flush_buf = torch.zeros(
            1 << 10 if smoke else 64 << 20, dtype=torch.float32, device="cpu" if smoke else "cuda"
        )

    def calibrate(self) -> None:
        cp = self.cp
        tl = cp.Timeline(self.ct)
        tl.idle(0.0)
        for i in range(100):
            tl.probe(i, cp.PROBE_SHORT)
            tl.probe(i, cp.PROBE_LONG)
        cal = tl.rows("calibration", "probe_fit", 0.0)

        def med(c: int) -> float:
            return statistics.median(
                float(r["us"]) for r in cal if r["kind"] == f"probe{c}" and int(r["index"]) >= 5
            )

        short, long_ = med(cp.PROBE_SHORT), med(cp.PROBE_LONG)
        mhz = (cp.PROBE_LONG - cp.PROBE_SHORT) / (long_ - short)
        self.overhead = short - cp.PROBE_SHORT / mhz
        print(f"probe fit: {mhz:.1f} MHz, event overhead {self.overhead:.3f} us", flush=True)
        self.events += cal

    def record(self, tl, name: str, phase: str) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
        rows = tl.rows(name, phase, self.overhead)
        self.events.extend(rows)
        calls = [float(r["us"]) for r in rows if r["kind"] == "call"]
        probes = [float(r["probe_mhz"]) for r in rows if r["probe_mhz"]]
        self.summary.append(
            {
                "row": name,
                "phase": phase,
                "calls": len(calls),
                "median_us": f"{statistics.median(calls):.2f}" if calls else "",
                "last5_us": f"{statistics.median(calls[-5:]):.2f}" if calls else "",
                "probe_mhz_median": f"{statistics.median(probes):.1f}" if probes else "",
            }
        )
        print(self.summary[-1], f"({time.perf_counter() - self.t_start:.0f} s)", flush=True)
        return rows

    def cold(self, name: str, fn) -> float:  # type: ignore[no-untyped-def]
        tl = self.cp.Timeline(self.ct)
        for i in range(3):
            tl.idle(self.idle_s)
            tl.probe(i)
            tl.run("call", i, fn)
            tl.probe(i)
        rows = self.record(tl, name, "cold")
        return statistics.median(float(r["us"]) for r in rows if r["kind"] == "call")

    def burst(self, tl, fn, calls: int) -> None:  # type: ignore[no-untyped-def]
        for i in range(calls):
            tl.run("call", i, fn)
            tl.probe(i)

    def calls_for(self, r: Row, cold_us: float) -> int:
        if r.kind == "step":
            return STEP_CALLS
        return max(4, math.ceil((0.05 if self.smoke else BURST_S) / max(cold_us * 1e-6, 1e-6)))

    def sustained(self, r: Row, fn) -> float:  # type: ignore[no-untyped-def]
        cold_us = self.cold(r.name, fn)
        tl = self.cp.Timeline(self.ct)
        tl.idle(self.idle_s)
        self.burst(tl, fn, self.calls_for(r, cold_us))
        tl2 = tl.follow()
        for i in range(60 if self.smoke else RECOVERY_PROBES):
            tl2.probe(i, 100_000)
        self.record(tl, r.name, "burst")
        self.record(tl2, r.name, "recovery")
        return cold_us

    def cross(self, short: Row, fn_short, long_: Row, fn_long, long_cold_us: float) -> None:  # type: ignore[no-untyped-def]
        self.cold(short.name, fn_short)
        tl = self.cp.Timeline(self.ct)
        tl.idle(self.idle_s)
        self.burst(tl, fn_long, self.calls_for(long_, long_cold_us))
        tl2 = tl.follow()
        self.burst(tl2, fn_short, CROSS_CALLS)
        self.record(tl, long_.name, f"burst_before_{short.name}")
        self.record(tl2, short.name, f"after_{long_.name}")

    def time_fn(self, tl, r: Row, fn) -> None:  # type: ignore[no-untyped-def]
        """measure.time_fn's structure: two warm-ups, one call, ``reps`` calls (a flush before
        each where cold); every call timed and followed by a probe, no synchronize between."""
        for i in range(2):
            tl.run("warmup", i, fn)
            tl.probe(i)
        if not self.smoke:
            self.torch.cuda.synchronize()  # as time_fn: the warm-ups done before the one timed call
        t0 = time.perf_counter()
        tl.run("one", 0, fn)
        if not self.smoke:
            self.torch.cuda.synchronize()
        one = max(time.perf_counter() - t0, 1e-6)
        tl.probe(0)
        reps = int(min(r.max_reps, max(5, r.budget_s / one)))
        for i in range(reps):
            if r.cold:
                tl.run("flush", i, lambda: self.flush_buf.add_(1))
            tl.run("call", i, fn)
            tl.probe(i)

    def calibration(self, fns: dict) -> None:  # type: ignore[type-arg]
        tl = self.cp.Timeline(self.ct)
        tl.idle(self.idle_s)
        for r in CALIBRATION:
            if r.name in fns:
                if r.after_idle:
                    tl.idle(self.idle_s)
                seg = tl.follow()
                self.time_fn(seg, r, fns[r.name])
                tl.last = seg.last
                self.record(seg, r.name, "time_fn")

    def all(self) -> None:
        self.calibrate()
        fns, cold = {}, {}
        for r in (*SUSTAINED, CROSS[0]):
            try:
                fns[r.name] = build(self.torch, self.M, r, self.smoke)
            except Exception as exc:  # noqa: BLE001 - keep the other rows
                print(f"{r.name}: build failed: {exc!r}", flush=True)
        for r in SUSTAINED:
            if r.name in fns:
                cold[r.name] = self.sustained(r, fns[r.name])
                if r.kind == "step" and not self.smoke:
                    del fns[r.name]
                    self.torch.cuda.empty_cache()
        long_ = next(r for r in SUSTAINED if r.name == CROSS[1])
        if CROSS[0].name in fns and long_.name in fns:
            self.cross(CROSS[0], fns[CROSS[0].name], long_, fns[long_.name], cold[long_.name])
        fns.clear()
        if not self.smoke:
            self.torch.cuda.empty_cache()
        cal = {}
        for r in CALIBRATION:
            try:
                cal[r.name] = build(self.torch, self.M, r, self.smoke)
            except Exception as exc:  # noqa: BLE001
                print(f"{r.name}: build failed: {exc!r}", flush=True)
        self.calibration(cal)


def measure(out: Path, smoke: bool) -> int:
    import clock_power as cp
    import measure as M
    import torch

    ctx = M.Ctx(device=torch.device("cpu" if smoke else "cuda"), tiny=smoke)
    print("sdpa backend:", M.pick_sdpa_backend(ctx), flush=True)
    sampler = None
    if not smoke:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True  # as measure.py
        props = torch.cuda.get_device_properties(0)
        bus = (
            f"{getattr(props, 'pci_domain_id', 0):08x}:{getattr(props, 'pci_bus_id', 0):02x}:"
            f"{getattr(props, 'pci_device_id', 0):02x}.0"
        )
        uuid = str(getattr(props, "uuid", ""))
        uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        print(
            f"device {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}",
            flush=True,
        )
        sampler = cp.Sampler(out, bus, uuid)
    run = Check(torch, M, cp, smoke)
    try:
        run.all()
    finally:
        try:  # a device error must not lose what was measured (run ae lost events.csv here)
            if not smoke:
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            print(f"synchronize failed: {exc!r}", flush=True)
        time.sleep(0.3)
        if sampler is not None:
            sampler.close()
        cp.write_tables(out, run.events, run.summary)
    print(f"done in {time.perf_counter() - run.t_start:.0f} s", flush=True)
    return 0


# --------------------------------------------------------------------------- the model side (CPU)
#: which controller the model side runs: "frozen" (``SmClock``, run ae's), "slew"
#: (``SlewSmClock``; p12clock3); ``--controller``
CONTROLLER = "frozen"


def make_clock(spec):  # type: ignore[no-untyped-def]
    """A fresh controller (idle GPU) of the kind ``CONTROLLER`` names."""
    from rdusim.hw.gpu_clock import SlewSmClock, SmClock

    kinds = {"frozen": SmClock, "slew": SlewSmClock}
    return kinds[CONTROLLER](spec)


PROBE_S = 40_000 / 1.98e9 + 4.6e-6  # a probe between calls: the GPU near idle (run v's probe)
FLUSH_BYTES = 2 * (256 << 20)  # measure.flush: a 256 MiB buffer read and written


def _row_kernels(r: Row, gpu):  # type: ignore[no-untyped-def]
    from rdusim.mapping.gpu import flash_decode, flash_prefill, gemm

    if r.kind == "gemm":
        return gemm("gemm", r.m, r.n, r.k, gpu)
    if r.kind == "attention":
        return flash_prefill("attention", 1, 32, 8, r.tokens, 128, gpu)
    return flash_decode("attention", r.batch, 32, 8, r.tokens, 128, gpu)


class Model:
    """The engine's predictions for the rows, with the clock model (``on``) and without (``off``)."""

    def __init__(self, hw: str = "hw_configs/h100.yaml") -> None:
        from rdusim.config.loader import load_spec, model_path
        from rdusim.config.schema import ModelSpec
        from rdusim.hw.gpu import load_gpu_node

        self.gpu = load_gpu_node(hw).gpu
        self.model = load_spec(model_path("llama-3.1-8b"), ModelSpec)

    def clock(self):  # type: ignore[no-untyped-def]
        return make_clock(self.gpu.spec.clock)

    def call_s(self, r: Row, clock) -> float:  # type: ignore[no-untyped-def]
        """One call on ``clock`` (None: full clock), left warm for the next."""
        from rdusim.analysis.gpu.predict import MEASURED_LAYER, simulate_gpu_step
        from rdusim.mapping.gpu import streaming
        from rdusim.sim.gpu import elapsed_s, simulate_gpu

        if r.kind in ("step", "decode_graph"):
            prefill = r.kind == "step"
            return simulate_gpu_step(
                self.model,
                self.gpu,
                layer=MEASURED_LAYER,
                head=["embedding", "lm_head"],
                phase="prefill" if prefill else "decode",
                batch=1 if prefill else r.batch,
                seq_len=r.tokens,
                mode="eager" if prefill else "graph",
                clock=clock,
            ).seconds
        if r.kind == "flush":
            kernels = [streaming("flush", FLUSH_BYTES, self.gpu)]
        else:
            kernels = _row_kernels(r, self.gpu)
        return elapsed_s(
            simulate_gpu([(k, 0) for k in kernels], self.gpu, mode="stream", clock=clock)
        )

    def sequence(self, r: Row, calls: int, clock, flush: bool = False) -> list[float]:  # type: ignore[no-untyped-def]
        out = []
        for _ in range(calls):
            if flush:
                self.call_s(Row("flush", "flush", "cal"), clock)
            out.append(self.call_s(r, clock))
            clock.idle(PROBE_S)
        return out


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def predict(path: str) -> int:
    """The frozen predictions: per row and metric, clock model on and off (full clock)."""
    m = Model()
    rows: list[dict[str, object]] = []

    def add(row: str, *metrics: tuple[str, float, float, str]) -> None:
        """One row per ``(metric, clock on, clock off, what)``, in order."""
        for metric, on, off, what in metrics:
            rows.append(
                {
                    "row": row,
                    "metric": metric,
                    "clock_on": f"{on:.6g}",
                    "clock_off": f"{off:.6g}",
                    "what": what,
                }
            )
            print(rows[-1], flush=True)

    for r in SUSTAINED:
        cold = m.call_s(r, None)
        cold_on = m.call_s(
            r, m.clock()
        )  # a cold call from an idle GPU (a long one lowers its own clock)
        calls = STEP_CALLS if r.kind == "step" else max(4, math.ceil(BURST_S / cold))
        clk = m.clock()
        seq = m.sequence(r, calls, clk)
        last5 = _med(seq[-5:])
        add(
            r.name,
            (
                "cold_us",
                cold_on * 1e6,
                cold * 1e6,
                "median of 3 cold calls (each after 1.2 s idle)",
            ),
            (
                "burst_first5_us",
                _med(seq[:5]) * 1e6,
                cold * 1e6,
                "burst: median of the first 5 calls",
            ),
            ("burst_last5_us", last5 * 1e6, cold * 1e6, "burst: median of the last 5 calls"),
            ("burst_last5_over_cold", last5 / cold_on, 1.0, "burst last 5 / cold"),
            (
                "burst_end_clock",
                clk.share,
                1.0,
                "clock at the burst's end, share of the cold clock (probes)",
            ),
        )
        if r.name == CROSS[1]:
            short = CROSS[0]
            s_cold = m.call_s(short, None)
            s_cold_on = m.call_s(short, m.clock())
            after = m.sequence(short, CROSS_CALLS, clk)
            add(
                short.name,
                ("cold_us", s_cold_on * 1e6, s_cold * 1e6, "median of 3 cold calls"),
                (
                    f"after_{r.name}_first5_over_cold",
                    _med(after[:5]) / s_cold_on,
                    1.0,
                    f"first 5 of {CROSS_CALLS} calls right after the {r.name} burst / cold",
                ),
                (
                    f"after_{r.name}_last5_over_cold",
                    _med(after[-5:]) / s_cold_on,
                    1.0,
                    f"last 5 of {CROSS_CALLS} / cold",
                ),
            )
    clk = m.clock()  # the calibration rows: one after another from idle
    for r in CALIBRATION:
        if r.after_idle:
            clk.idle(IDLE_S)
        one_cold = m.call_s(r, None)
        warm = m.sequence(r, 3, clk, flush=False)  # two warm-ups and time_fn's one call
        one = warm[-1] + PROBE_S
        reps = int(min(r.max_reps, max(5, r.budget_s / one)))
        seq = m.sequence(r, reps, clk, flush=r.cold)
        cold_reps = int(min(r.max_reps, max(5, r.budget_s / (one_cold + PROBE_S))))
        add(
            r.name,
            ("reps", reps, cold_reps, "time_fn's repetitions"),
            (
                "median_us",
                _med(seq) * 1e6,
                one_cold * 1e6,
                "time_fn's median (what the sweep records)",
            ),
            ("median_over_cold", _med(seq) / one_cold, 1.0, "that median / the call at full clock"),
            ("end_clock", clk.share, 1.0, "clock after the row, share of the cold clock"),
        )
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


def calibration_table() -> int:
    """Item 4 of the design brief, from the committed sweeps: each row a fitted constant rests on,
    timed as ``measure.time_fn`` did (three calls, then its recorded repetitions, each after the
    256 MiB flush), from an idle GPU; the clock model's median over its full-clock call. A row
    whose median comes out above 1 holds a lowered clock in its constant."""
    from compare_sweep import RUN_D, RUNS

    from rdusim.analysis.gpu.predict import ATTENTION_CALIBRATION, is_gemm_calibration, row_kernels
    from rdusim.mapping.gpu import streaming
    from rdusim.sim.gpu import elapsed_s, simulate_gpu

    m = Model()
    gpu = m.gpu
    root = Path(__file__).resolve().parents[2]
    rows = [r for r in csv.DictReader((root / RUNS[0]).open()) if is_gemm_calibration(r)]
    rows += [
        r
        for f in (RUNS[0], RUN_D)
        for r in csv.DictReader((root / f).open())
        if r["name"] in ATTENTION_CALIBRATION
    ]
    flush = [(streaming("flush", FLUSH_BYTES, gpu), 0)]
    print(
        "| row | constant | call (us) | reps | back to back (ms) | model: median / full clock | clock at the end |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        ks = [(k, 0) for k in row_kernels(r, gpu)]
        full = elapsed_s(simulate_gpu(ks, gpu, mode="stream"))
        clk = m.clock()
        times = []
        for i in range(3 + int(r["reps"])):
            if i >= 3:
                simulate_gpu(flush, gpu, mode="stream", clock=clk)
            times.append(elapsed_s(simulate_gpu(ks, gpu, mode="stream", clock=clk)))
        med = statistics.median(times[3:])
        span = (3 + int(r["reps"])) * float(r["median_us"]) / 1e3
        what = (
            "efficiency.attention_tensor, attention_overlap"
            if r["kind"] != "gemm"
            else "efficiency.gemm_tensor"
        )
        print(
            f"| {r['name']} | {what} | {float(r['median_us']):.0f} | {r['reps']} | {span:.0f} | {med / full:.3f} | {clk.share:.3f} |"
        )
    return 0


TP2_CSV = "benchmarks/gpu/h200x2-20261128ac-tp2.csv"  # run ac: Llama-3.1-8B TP2, FlashAttention forced


def tp2_prefill(csv_path: str = TP2_CSV, node_path: str = "hw_configs/h200-8.yaml") -> list[str]:
    """A collectives.py CSV's TP2 prefill rows (run ac's by default: two H200s, FlashAttention
    forced; the step: an all-reduce after o and down; the model each row names, Llama-3.1-8B when
    the CSV has no ``model`` column) with and without the clock: each row was timed as 3 + 20
    steps back to back (eager); with the clock, that sequence from an idle GPU, the median of the
    20. The all-reduce draws idle power in the clock model; the other GPU is the same."""
    from rdusim.analysis.gpu.predict import MEASURED_LAYER, simulate_gpu_step
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import load_gpu_node

    root = Path(__file__).resolve().parents[2]
    node = load_gpu_node(root / node_path)
    layer = list(MEASURED_LAYER)
    layer.insert(layer.index("o_gemm") + 1, "all_reduce")
    layer.insert(layer.index("down_gemm") + 1, "all_reduce")
    with (root / csv_path).open() as fh:
        prefills = [r for r in csv.DictReader(fh) if r["kind"] == "e2e_prefill_tp2"]
    models = {}
    out = [
        f"| row ({Path(csv_path).name}, 2 x H200) | measured (us) | model (us) | error | with the clock (us) | error | clock at the end |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in prefills:
        name = r.get("model") or "llama-3.1-8b"
        if name not in models:
            models[name] = load_spec(model_path(name), ModelSpec)
        length = int(r["seq_len"])

        def step(clock, length: int = length, spec=models[name]) -> float:  # type: ignore[no-untyped-def]
            return simulate_gpu_step(
                spec,
                node.gpu,
                layer=layer,
                head=["embedding", "lm_head"],
                phase="prefill",
                batch=1,
                seq_len=length,
                mode="eager",
                tp=2,
                clock=clock,
            ).seconds

        off = step(None)
        clk = make_clock(node.gpu.spec.clock)
        seq = [step(clk) for _ in range(3 + int(r["reps"]))]
        on = statistics.median(seq[3:])
        t = float(r["median_us"]) * 1e-6
        out.append(
            f"| {r['name']} | {t * 1e6:.0f} | {off * 1e6:.0f} | {(off / t - 1) * 100:+.1f}% | {on * 1e6:.0f} | "
            f"{(on / t - 1) * 100:+.1f}% | {clk.share:.3f} |"
        )
    return out


def _replayer(kernels, gpu):  # type: ignore[no-untyped-def]
    """One timed-alone call (``stream``) of ``kernels`` as the engine runs it with a clock: the
    full-clock trace once, then per call the launch as idle and each kernel's work at the clock
    (the engine's own steps, ``SmClock.idle`` and ``SmClock.run_kernel``, without re-simulating
    the CTAs)."""
    from rdusim.sim.gpu import simulate_gpu

    trace = simulate_gpu([(k, 0) for k in kernels], gpu, mode="stream")
    parts, last = [], 0.0
    for k, rec in zip(kernels, trace.kernels, strict=True):
        work = rec.end_s - rec.start_s - rec.launch_sync_s
        parts.append((rec.start_s - last + rec.launch_sync_s, work, k))
        last = rec.end_s

    def call(clock) -> float:  # type: ignore[no-untyped-def]
        if clock is None:
            return last
        t = 0.0
        for idle, work, k in parts:
            clock.idle(idle)
            t += idle + clock.run_kernel(work, k.math, k.flops, k.bytes, k.keys)
        return t

    return call


def _time_fn_median(call, flush, reps: int, clock, cold: bool = True) -> float:  # type: ignore[no-untyped-def]
    """measure.time_fn's sequence on ``clock``: three calls, then ``reps`` (a flush before each)."""
    times = []
    for i in range(3 + reps):
        if cold and i >= 3:
            flush(clock)
        times.append(call(clock))
    return statistics.median(times[3:])


def heldout_rows() -> list[str]:
    """The earlier runs' 4K-8K FA2 prefill rows (clock_power_analysis.heldout's selection: the
    previous CSV row is >= 0.25 s of back-to-back attention), with the clock model: the previous
    row's time_fn sequence from an idle GPU, then this row's; the other rows alone from idle."""
    import compare_sweep as cs

    from rdusim.analysis.gpu.predict import row_kernels
    from rdusim.mapping.gpu import streaming

    groups: dict[str, list[tuple[float, float]]] = {"after": [], "after128": [], "other": []}
    for path in (
        cs.RUNS[0],
        cs.RUN_D,
        cs.RUN_E[0],
        cs.RUN_G,
        cs.RUN_I,
        cs.RUN_K,
        cs.RUN_P,
        cs.RUN_Q,
        cs.RUN_R,
    ):
        with (cs.ROOT / path).open() as fh:
            rows = list(csv.DictReader(fh))
        gpu = cs.Gpu(cs.run_spec(rows))
        flush = _replayer([streaming("flush", FLUSH_BYTES, gpu)], gpu)
        for i, r in enumerate(rows):
            if not (
                r["kind"].startswith("attn_prefill")
                and r["name"].startswith("flash_")
                and int(float(r["seq_len"])) <= 8192
            ):
                continue
            prev = rows[i - 1] if i else None
            burst = (
                float(prev["median_us"]) * int(prev["reps"]) * 1e-6
                if prev is not None and prev["name"].startswith(cs.ATTENTION_ROW)
                else 0.0
            )
            after = burst >= cs.CLOCK_BURST_S
            call = _replayer(row_kernels(r, gpu), gpu)
            clk = make_clock(gpu.spec.clock)
            if after:
                _time_fn_median(
                    _replayer(row_kernels(prev, gpu), gpu), flush, int(prev["reps"]), clk
                )
            on = _time_fn_median(call, flush, int(r["reps"]), clk)
            t, off = float(r["median_us"]) * 1e-6, call(None)
            pair = (off / t - 1, on / t - 1)
            groups["after" if after else "other"].append(pair)
            if after and prev["head_dim"] and int(float(prev["head_dim"])) == 128:
                groups["after128"].append(pair)
    out = [
        "| rows (runs a d e g i k p q r) | n | model: median abs | worst | median signed | with the clock: median abs | worst | median signed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, key in (
        ("right after >= 0.25 s of attention", "after"),
        ("of which after head_dim 128", "after128"),
        ("the others", "other"),
    ):
        g = groups[key]

        def st(e: list[float]) -> str:
            return (
                f"{statistics.median(abs(x) for x in e) * 100:.1f}% | {max(abs(x) for x in e) * 100:.1f}% | "
                f"{statistics.median(e) * 100:+.1f}%"
            )

        out.append(f"| {label} | {len(g)} | {st([x[0] for x in g])} | {st([x[1] for x in g])} |")
    return out


def gemm_rows_clock() -> list[str]:
    """compare_sweep.gemm_clock_section's rows (the GEMM sweep's prediction rows with a profiled
    call of >= 0.1 ms), the model against the timed median with and without the clock: each row's
    time_fn sequence (sweep.py: 3 calls, then its recorded repetitions, a flush before each) after
    the rows of the same weight that ran right before it (smaller m first), from an idle GPU."""
    import compare_sweep as cs

    from rdusim.analysis.gpu.predict import is_gemm_calibration, row_kernels
    from rdusim.mapping.gpu import streaming

    out = [
        "| run | profiled call | rows | model vs timed: median signed | median abs | worst | "
        "with the clock: median signed | median abs | worst |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run, path in (("1 (H100)", cs.RUNS[0]), ("2 (H100)", cs.RUNS[1]), ("k (H200)", cs.RUN_K)):
        rows = list(csv.DictReader((cs.ROOT / path).open()))
        gpu = cs.Gpu(cs.run_spec(rows))
        flush = _replayer([streaming("flush", FLUSH_BYTES, gpu)], gpu)
        device: dict[str, float] = {}
        for k in csv.DictReader((cs.ROOT / path.replace("-sweep.csv", "-kernels.csv")).open()):
            device[k["row"]] = device.get(k["row"], 0.0) + float(k["device_us"])
        groups: dict[str, list[tuple[float, float]]] = {}
        for i, r in enumerate(rows):
            if (
                r["kind"] != "gemm"
                or r["set"] != "prediction"
                or is_gemm_calibration(r)
                or r["name"] not in device
            ):
                continue
            d = device[r["name"]]
            if d < 100:
                continue
            j = i
            while (
                j > 0
                and rows[j - 1]["kind"] == "gemm"
                and (rows[j - 1]["n"], rows[j - 1]["k"]) == (r["n"], r["k"])
            ):
                j -= 1
            clk = make_clock(gpu.spec.clock)
            for prev in rows[j:i]:
                _time_fn_median(
                    _replayer(row_kernels(prev, gpu), gpu), flush, int(prev["reps"]), clk
                )
            call = _replayer(row_kernels(r, gpu), gpu)
            on = _time_fn_median(call, flush, int(r["reps"]), clk)
            t, off = float(r["median_us"]) * 1e-6, call(None)
            label = "0.1-0.5 ms" if d < 500 else "0.5-2 ms" if d < 2000 else "over 2 ms"
            groups.setdefault(label, []).append((off / t - 1, on / t - 1))
        for label in ("0.1-0.5 ms", "0.5-2 ms", "over 2 ms"):
            g = groups.get(label, [])

            def part(e: list[float]) -> str:
                return (
                    f"{statistics.median(e) * 100:+.1f}% | {statistics.median(abs(x) for x in e) * 100:.1f}% | "
                    f"{max(abs(x) for x in e) * 100:.1f}%"
                )

            if g:
                out.append(
                    f"| {run} | {label} | {len(g)} | {part([x[0] for x in g])} | {part([x[1] for x in g])} |"
                )
    return out


# --------------------------------------------------------------------------- measured against frozen
def _events(prefix: str) -> list[dict[str, str]]:
    p = Path(f"{prefix}-events.csv.gz")
    with gzip.open(p, "rt") if p.exists() else open(f"{prefix}-events.csv") as fh:
        return list(csv.DictReader(fh))


def measured(prefix: str) -> dict[tuple[str, str], float]:
    """The measured value of every (row, metric) that ``predict`` writes."""
    ev = _events(prefix)
    by: dict[tuple[str, str], list[dict[str, str]]] = {}
    for e in ev:
        by.setdefault((e["workload"], e["phase"]), []).append(e)

    def calls(name: str, phase: str, kind: str = "call") -> list[float]:
        return [float(e["us"]) for e in by.get((name, phase), []) if e["kind"] == kind]

    def probes(name: str, phase: str) -> list[float]:
        return [float(e["probe_mhz"]) for e in by.get((name, phase), []) if e["probe_mhz"]]

    out: dict[tuple[str, str], float] = {}
    cold_mhz: dict[str, float] = {}
    for r in (*SUSTAINED, CROSS[0]):
        c = calls(r.name, "cold")
        if not c:
            continue
        out[(r.name, "cold_us")] = _med(c)
        cold_mhz[r.name] = _med(probes(r.name, "cold"))
        b = calls(r.name, "burst")
        if b:
            out[(r.name, "burst_first5_us")] = _med(b[:5])
            out[(r.name, "burst_last5_us")] = _med(b[-5:])
            out[(r.name, "burst_last5_over_cold")] = _med(b[-5:]) / _med(c)
            out[(r.name, "burst_end_clock")] = _med(probes(r.name, "burst")[-5:]) / cold_mhz[r.name]
    short, long_ = CROSS[0].name, CROSS[1]
    a = calls(short, f"after_{long_}")
    if a and (short, "cold_us") in out:
        out[(short, f"after_{long_}_first5_over_cold")] = _med(a[:5]) / out[(short, "cold_us")]
        out[(short, f"after_{long_}_last5_over_cold")] = _med(a[-5:]) / out[(short, "cold_us")]
    idle_mhz = _med(list(cold_mhz.values()))
    for r in CALIBRATION:
        c = calls(r.name, "time_fn")
        if not c:
            continue
        out[(r.name, "reps")] = len(c)
        out[(r.name, "median_us")] = _med(c)
        p = probes(r.name, "time_fn")
        out[(r.name, "end_clock")] = _med(p[-5:]) / idle_mhz
        out[(r.name, "median_clock")] = _med(p) / idle_mhz
    return out


def measured_from_log(log: str) -> tuple[dict[tuple[str, str], float], list[str]]:
    """Run ae's measured values from the per-phase summaries its log printed (its events.csv was
    lost: see docs/gpu.md). What the summaries do not hold is replaced and said so: the burst's
    end clock by its median probe clock over the whole burst, the crossed row's first 5 by the
    median of its 20 calls; clocks are shares of the probe fit's idle clock (the log's first line)."""
    import ast
    import re

    text = Path(log).read_text()
    idle = float(re.search(r"probe fit: ([0-9.]+) MHz", text)[1])
    ph: dict[tuple[str, str], dict[str, str]] = {}
    for line in text.splitlines():
        if line.startswith("{'row'"):
            d = ast.literal_eval(line[: line.rindex("}") + 1])
            ph[(d["row"], d["phase"])] = d
    out: dict[tuple[str, str], float] = {}
    notes = [f"idle clock (probe fit) {idle:.1f} MHz"]
    for r in SUSTAINED:
        c, b = ph.get((r.name, "cold")), ph.get((r.name, "burst"))
        if c and b:
            cold = float(c["median_us"])
            out[(r.name, "cold_us")] = cold
            out[(r.name, "burst_last5_us")] = float(b["last5_us"])
            out[(r.name, "burst_last5_over_cold")] = float(b["last5_us"]) / cold
            out[(r.name, "burst_end_clock")] = float(b["probe_mhz_median"]) / idle
    short, long_ = CROSS[0].name, CROSS[1]
    c, a = ph.get((short, "cold")), ph.get((short, f"after_{long_}"))
    if c and a:
        out[(short, "cold_us")] = float(c["median_us"])
        out[(short, f"after_{long_}_first5_over_cold")] = float(a["median_us"]) / float(
            c["median_us"]
        )
        out[(short, f"after_{long_}_last5_over_cold")] = float(a["last5_us"]) / float(
            c["median_us"]
        )
    for r in CALIBRATION:
        t = ph.get((r.name, "time_fn"))
        if t:
            out[(r.name, "reps")] = float(t["calls"])
            out[(r.name, "median_us")] = float(t["median_us"])
            out[(r.name, "median_clock")] = float(t["probe_mhz_median"]) / idle
    notes.append(
        "substituted: burst_end_clock = the burst's median probe clock; the crossed row's first5 = its 20 calls' median"
    )
    return out, notes


def _table(pred: list[dict[str, str]], got: dict[tuple[str, str], float]) -> None:
    """The comparison table: each frozen prediction that has a measurement, clock on and off, with
    its error against the measurement (blank where the measurement is 0)."""
    print("| row | metric | measured | clock on | err | clock off | err |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for p in pred:
        v = got.get((p["row"], p["metric"]))
        if v is None:
            continue
        on, off = float(p["clock_on"]), float(p["clock_off"])

        def err(x: float, v: float = v) -> str:
            return f"{(x / v - 1) * 100:+.1f}%" if v else ""

        print(
            f"| {p['row']} | {p['metric']} | {v:.4g} | {on:.4g} | {err(on)} | {off:.4g} | {err(off)} |"
        )


def against_log(frozen: str, log: str) -> int:
    """``against`` on run ae's log summaries (``measured_from_log``)."""
    with open(frozen) as fh:
        pred = list(csv.DictReader(fh))
    got, notes = measured_from_log(log)
    for n in notes:
        print(f"({n})")
    _table(pred, got)
    for (row, metric), v in got.items():
        if metric == "median_clock":
            print(f"| {row} | median clock (measured only) | {v:.3f} | | | | |")
    return 0


def against(frozen: str, prefix: str) -> int:
    with open(frozen) as fh:
        pred = list(csv.DictReader(fh))
    got = measured(prefix)
    _table(pred, got)
    for (row, metric), v in sorted(got.items()):
        if metric == "median_clock":
            print(f"| {row} | {metric} (measured only) | {v:.4g} | | | | |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, fake events")
    ap.add_argument("--predict", metavar="CSV")
    ap.add_argument("--against", nargs=2, metavar=("CSV", "PREFIX"))
    ap.add_argument(
        "--against-log",
        nargs=2,
        metavar=("CSV", "LOG"),
        help="run ae: measured from its log summaries",
    )
    ap.add_argument(
        "--gemms",
        action="store_true",
        help="GEMM sweep rows timed back to back, with the clock (CPU)",
    )
    ap.add_argument(
        "--heldout",
        action="store_true",
        help="earlier 4K-8K FA2 rows after bursts, with the clock (CPU)",
    )
    ap.add_argument(
        "--tp2",
        nargs="?",
        const=TP2_CSV,
        metavar="CSV",
        help="a collectives.py CSV's TP2 prefill rows (run ac's by default) with and without the clock (CPU)",
    )
    ap.add_argument(
        "--calibration",
        action="store_true",
        help="the fitted constants' rows under the clock model (CPU)",
    )
    ap.add_argument(
        "--controller",
        choices=("frozen", "slew"),
        default="frozen",
        help="the model side's controller: frozen (SmClock) or slew (SlewSmClock)",
    )
    args = ap.parse_args()
    global CONTROLLER
    CONTROLLER = args.controller
    if args.calibration:
        return calibration_table()
    if args.gemms:
        print("\n".join(gemm_rows_clock()))
        return 0
    if args.heldout:
        print("\n".join(heldout_rows()))
        return 0
    if args.tp2:
        print("\n".join(tp2_prefill(args.tp2)))
        return 0
    if args.predict:
        return predict(args.predict)
    if args.against:
        return against(*args.against)
    if args.against_log:
        return against_log(*args.against_log)
    if not args.out:
        ap.error("OUT_DIR is required")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return measure(out, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
