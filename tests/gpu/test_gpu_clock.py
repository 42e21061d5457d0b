"""The SM-clock model (rdusim.hw.gpu_clock): the controller on tiny cases in closed form, the
engine with and without it, and the GPU documents' ``clock`` section."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rdusim.analysis.gpu.predict import load_gpu_mapping, simulate_gpu_mapping
from rdusim.cli import main
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu
from rdusim.hw.gpu_clock import STEP_S, SlewSmClock, SmClock, clock_scale, kernel_power_w
from rdusim.mapping.gpu import flash_decode, flash_prefill, gemm, streaming
from rdusim.sim.gpu import elapsed_s, simulate_gpu

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "hw_configs/h100.yaml"
H200 = ROOT / "hw_configs/h200.yaml"


def spec(path: Path = H100):  # type: ignore[no-untyped-def]
    return load_spec(path, GpuSpec).clock


def test_constant_power_reaches_the_cap_clock_at_the_closed_form_time() -> None:
    """A kernel drawing P > limit from a cold GPU: the average is P + (idle - P) e^(-t / fall), so
    the clock stays full until t1 = fall x ln((P - idle) / (P - limit)) and settles at
    (limit - idle) / (P - idle) of full."""
    s = spec()
    p = s.idle_w + (s.power_limit_w - s.idle_w) * 1.325  # run v's GEMM: 887 W at full clock
    c = SmClock(s)
    t1 = s.fall_window_s * math.log((p - s.idle_w) / (p - s.power_limit_w))
    c.run(t1 - STEP_S, p, "attention")
    assert c.share == 1.0
    c.run(2 * STEP_S, p, "attention")
    assert c.share < 1.0
    c.run(2.0, p, "attention")
    assert c.share == pytest.approx((s.power_limit_w - s.idle_w) / (p - s.idle_w), rel=1e-6)
    assert 1 / c.share == pytest.approx(1.325, rel=1e-6)
    assert 0.025 < t1 < 0.035  # run v: the GEMM's clock falls from about 20 ms


def test_recovery_after_idle_follows_the_rise_window() -> None:
    """From the GEMM's steady average, idle brings the clock back to 0.98 of full after
    rise x ln((A - idle) / (limit' - idle)), limit' = idle + (limit - idle) / 0.98: run v's 65 ms."""
    s = spec()
    a = s.idle_w + (s.power_limit_w - s.idle_w) * 1.325
    c = SmClock(s, a)
    back = s.idle_w + (s.power_limit_w - s.idle_w) / 0.98
    t = s.rise_window_s * math.log((a - s.idle_w) / (back - s.idle_w))
    c.idle(t)
    assert c.share == pytest.approx(0.98, rel=1e-9)
    assert t == pytest.approx(0.065, abs=0.001)


def test_no_kernel_runs_faster_than_at_full_clock() -> None:
    s = spec()
    for cls in ("gemm", "attention", "mla", "none", "nvlink"):
        for share in (1.0, 0.95, 0.884, 0.8, 0.5):
            assert clock_scale(s, cls, share) >= 1.0
        c = SmClock(s)
        for power in (s.idle_w, 500.0, 900.0, 2000.0):
            assert c.run(1e-3, power, cls) >= 1e-3 * (1 - 1e-12)
            assert c.share <= 1.0


def test_time_follows_the_clock_per_class() -> None:
    """run v: attention 1/f; a GEMM flat to the knee, 1/f below; streaming none."""
    s = spec()
    assert clock_scale(s, "attention", 0.8) == pytest.approx(1.25)
    assert clock_scale(s, "gemm", 0.9) == 1.0
    assert clock_scale(s, "gemm", 0.75) == pytest.approx(s.gemm_knee / 0.75)
    assert clock_scale(s, "none", 0.5) == 1.0


def test_power_per_class_from_run_v_anchors() -> None:
    """At an anchor's own rate a kernel draws the anchor's power; a copy at the memory anchor's
    rate 477 W; collectives idle; attention at a low tensor rate the memory rule."""
    s = spec()
    g = s.gemm
    assert kernel_power_w(s, "gemm", g.rate, 0.0, 1.0) == pytest.approx(125 + 575 * 1.325)
    assert kernel_power_w(s, "none", 0.0, s.memory.rate, 1.0) == pytest.approx(477.0)
    a4 = s.attention[0]
    assert kernel_power_w(s, "attention", a4.rate, 0.0, 1.0, keys=4096) == pytest.approx(625.0)
    assert kernel_power_w(s, "attention", 3.436e14, 0.0, 1.0, keys=200_000) == pytest.approx(
        125 + 575 * 1.105
    )
    assert kernel_power_w(s, "nvlink", 1e15, 1e13, 1.0) == s.idle_w
    assert kernel_power_w(s, "attention", 1e12, 2e12, 1.0, keys=8192) < s.power_limit_w


def test_engine_with_the_clock_is_deterministic_and_off_by_default() -> None:
    gpu = Gpu(load_spec(H100, GpuSpec))
    ks = [(k, 0) for k in gemm("g", 8192, 28672, 8192, gpu)] * 40
    off = elapsed_s(simulate_gpu(ks, gpu, mode="stream"))
    none = elapsed_s(simulate_gpu(ks, gpu, mode="stream", clock=None))
    assert off == none
    on1 = simulate_gpu(ks, gpu, mode="stream", clock=SmClock(gpu.spec.clock))
    on2 = simulate_gpu(ks, gpu, mode="stream", clock=SmClock(gpu.spec.clock))
    assert on1 == on2
    assert elapsed_s(on1) > off * 1.05  # 0.19 s of GEMMs back to back: the clock falls
    first = on1.kernels[0]
    assert first.end_s - first.start_s == pytest.approx(
        off / 40, rel=1e-9
    )  # 4.7 ms: before the fall


def test_short_and_memory_bound_work_keeps_full_clock() -> None:
    """A copy stream (477 W) and 4K FA2 prefill (625 W) stay under the limit however long."""
    gpu = Gpu(load_spec(H100, GpuSpec))
    for ks in ([streaming("copy", 2 << 30, gpu)], flash_prefill("a", 1, 32, 8, 4096, 128, gpu)):
        seq = [(k, 0) for k in ks] * 200
        c = SmClock(gpu.spec.clock)
        assert elapsed_s(simulate_gpu(seq, gpu, mode="stream", clock=c)) == pytest.approx(
            elapsed_s(simulate_gpu(seq, gpu, mode="stream")), rel=1e-9
        )
        assert c.share == 1.0


def test_h200_carries_the_h100_constants_at_its_own_limit() -> None:
    a, b = spec(H100), spec(H200)
    assert b.power_limit_w == 700.0
    assert a == b


@pytest.mark.parametrize(
    ("old", "new", "at", "key"),
    [
        ("  power_limit: 700.0", "  power_limit: -700.0", "  power_limit:", "clock.power_limit"),
        ("  idle: 125.0", "  idle: 800.0", "  idle:", "clock.idle: idle (800 W) must be under"),
        ('  fall_window: "22 ms"', '  fall_window: "soon"', "  fall_window:", "clock.fall_window"),
        (
            '  fall_window: "22 ms"',
            '  fall_window: "0 ms"',
            "  fall_window:",
            "clock.fall_window: must be > 0",
        ),
        (
            '  rise_window: "249 ms"',
            '  rise_window: "-5 ms"',
            "  rise_window:",
            "clock.rise_window: must be > 0",
        ),
        ("  gemm_knee: 0.884", "  gemm_knee: 1.884", "  gemm_knee:", "clock.gemm_knee"),
        (
            "gemm: {rate: 7.939e+14, slowdown: 1.325}",
            "gemm: {rate: 7.939e+14, slowdown: 0.5}",
            "  gemm:",
            "clock.gemm.slowdown",
        ),
        (
            "gemm: {rate: 7.939e+14, slowdown: 1.325}",
            "gemm: {rate: 7.939e+14}",
            "  gemm:",
            "clock.gemm: ",
        ),
        (
            "gemm: {rate: 7.939e+14, slowdown: 1.325}",
            "gemm: {rate: 7.939e+14, power: 90.0}",
            "  gemm:",
            "clock.gemm: gemm: power (90 W) must lie above idle",
        ),
        (
            "memory: {rate: 2.995e+12, power: 477.0}",
            "memory: {tokens: 4096, rate: 2.995e+12, power: 477.0}",
            "  memory:",
            "clock.memory.tokens: unknown key 'tokens'",
        ),
        (
            "- {tokens: 16384, rate: 3.435e+14, slowdown: 1.024}",
            "- {tokens: 16384, rate: 3.435e+14, power: 720.0}",
            "  attention:",
            "clock.attention: attention[1] (tokens 16384): power (720 W)",
        ),
        (
            "- {tokens: 16384,",
            "- {",
            "    - { rate: 3.435e+14",
            "clock.attention[1].tokens: required key",
        ),
        (
            "- {tokens: 16384,",
            "- {tokens: 1024,",
            "  attention:",
            "clock.attention: anchors need tokens in increasing",
        ),
        ("power_exponent: 2.3", "power_exponent: 0.5", "  power_exponent:", "clock.power_exponent"),
        ("rise_rate: 3.46", "rise_rate: -1", "  rise_rate:", "clock.rise_rate"),
    ],
)
def test_bad_clock_constants_exit_2_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, at: str, key: str
) -> None:
    """Each bad constant: exit 2 at its own file, line and key path (a rule that spans keys at the
    later key: idle against power_limit, an anchor's power against both)."""
    text = H100.read_text()
    assert old in text
    bad = tmp_path / "h100.yaml"
    bad.write_text(text.replace(old, new, 1))
    lines = bad.read_text().splitlines()
    clock = lines.index("clock:")
    line = next(i for i, t in enumerate(lines[clock:], clock + 1) if t.startswith(at))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"h100.yaml:{line}: {key}" in err, err


def test_sustained_clock_mapping_option() -> None:
    """``clock: sustained`` (a GPU mapping): prefill back to back runs under the limit (GEMM-heavy
    steps at about 0.77 of full clock: 13% longer); the 32 x 8K H100 graph decode step stays at
    full clock (the other decode points: docs/gpu.md, 0 to +1.6%); MLA decode mappings refuse it."""
    from rdusim.errors import ConfigError

    full = simulate_gpu_mapping(*load_gpu_mapping(ROOT / "mappings/llama-3.1-8b/prefill-h100.yaml"))
    hot = simulate_gpu_mapping(
        *load_gpu_mapping(ROOT / "mappings/llama-3.1-8b/prefill-h100-sustained.yaml")
    )
    assert 1.10 < hot.step.seconds / full.step.seconds < 1.16
    spec, model, node = load_gpu_mapping(ROOT / "mappings/llama-3.1-8b/decode-h100.yaml")
    base = simulate_gpu_mapping(spec, model, node)
    same = simulate_gpu_mapping(spec.model_copy(update={"clock": "sustained"}), model, node)
    assert same.step.seconds == pytest.approx(base.step.seconds, rel=1e-9)
    spec, model, node = load_gpu_mapping(ROOT / "mappings/deepseek-r1/decode-h200x8.yaml")
    with pytest.raises(ConfigError, match="covers MLA prefill only"):
        simulate_gpu_mapping(spec.model_copy(update={"clock": "sustained"}), model, node)


def _line_of(path: Path, key: str) -> int:
    return next(
        i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(key)
    )


def test_validate_refuses_sustained_on_an_mla_model_at_the_clock_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An MLA model's decode steps run at full clock (FlashMLA's power is not measured):
    ``clock: sustained`` on one is refused by validate at the mapping's ``clock:`` line (not later
    by simulate without a location)."""
    src = ROOT / "mappings/deepseek-r1/decode-h200x8.yaml"
    text = src.read_text().replace(
        "../../hw_configs/h200-8.yaml", str(ROOT / "hw_configs/h200-8.yaml")
    )
    bad = tmp_path / "mla.yaml"
    bad.write_text(text.replace("launch: graph\n", "launch: graph\nclock: sustained\n", 1))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"mla.yaml:{_line_of(bad, 'clock:')}: clock: sustained covers an MLA model's prefill only" in err, (
        err
    )


def test_an_mla_prefill_runs_on_the_sustained_clock(tmp_path: Path) -> None:
    """DeepSeek-R1's prefill on 8 x H200 (FA3) under ``clock: sustained``: validates, and the step
    back to back is longer than at full clock, its FA3 attention and its GEMMs both slower (the
    GEMM class, run bs), by less than the FA2 class would give (run bq: 4-7% on long FA3 kernels)."""
    src = ROOT / "mappings/deepseek-r1/prefill-h200x8.yaml"
    hot = tmp_path / "prefill.yaml"
    hot.write_text(src.read_text().replace("../../hw_configs/h200-8.yaml", str(ROOT / "hw_configs/h200-8.yaml"))
                   .replace("phase: prefill\n", "phase: prefill\nclock: sustained\n", 1))
    assert main(["validate", str(hot)]) == 0
    full_spec, model, node = load_gpu_mapping(src, overrides=["workload.seq_len=4096"])
    sus_spec, _, _ = load_gpu_mapping(src, overrides=["workload.seq_len=4096", "clock=sustained"])
    full = simulate_gpu_mapping(full_spec, model, node).step
    sus = simulate_gpu_mapping(sus_spec, model, node).step
    assert 1.0 < sus.seconds / full.seconds < 1.15
    assert 1.0 < sus.kernels["mla_attention"] / full.kernels["mla_attention"] < 1.15


def test_validate_refuses_sustained_without_a_clock_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hardware (its own ``hardware:`` or ``--hw``) with no ``clock:`` section: refused at the
    mapping's ``clock:`` line."""
    text = H100.read_text()
    hw = tmp_path / "h100-noclock.yaml"
    hw.write_text(text[: text.index("\nclock:")] + "\n")
    src = ROOT / "mappings/llama-3.1-8b/prefill-h100-sustained.yaml"
    bad = tmp_path / "sustained.yaml"
    bad.write_text(src.read_text().replace("../../hw_configs/h100.yaml", str(hw)))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    line = _line_of(bad, "clock:")
    assert f"sustained.yaml:{line}: clock: sustained needs a clock section" in err, err
    assert main(["simulate", str(src), "--hw", str(hw)]) == 2
    err = capsys.readouterr().err
    assert (
        f"prefill-h100-sustained.yaml:{_line_of(src, 'clock:')}: clock: sustained needs" in err
    ), err
    assert "--hw" in err, err


def _decode_step_s(gpu: Gpu, batch: int, seq_len: int) -> tuple[float, float]:
    """The decode-h100 mapping's graph decode step at ``batch`` x ``seq_len`` on ``gpu``: its
    seconds at full clock and under ``clock: sustained``."""
    from rdusim.analysis.gpu.predict import load_gpu_mapping, simulate_gpu_step, sustained_gpu_step

    spec, model, _ = load_gpu_mapping(
        ROOT / "mappings/llama-3.1-8b/decode-h100.yaml", check_fit=False
    )
    kw = dict(
        layer=spec.layer,
        head=spec.head,
        phase="decode",
        batch=batch,
        seq_len=seq_len,
        mode="graph",
        tp=1,
        policy=spec.kv_policy,
    )
    return simulate_gpu_step(model, gpu, **kw).seconds, sustained_gpu_step(model, gpu, **kw).seconds


def test_decode_attention_takes_the_anchor_of_its_key_span() -> None:
    """FA2 decode at 32K keys (H100, batch 64, one split: the forward kernel's padded 128-row
    tiles, about 322 TFLOP/s) is priced against the 16K anchor (the nearest at or below its key
    span): idle + (anchor - idle) x rate / anchor rate = 677 W, under the limit, so the 64 x 32K
    graph decode step does not move under ``clock: sustained``. (Before ``keys`` was set on
    decode kernels they all took the 4K anchor: 716 W, and the step moved +2.2%.)"""
    gpu = Gpu(load_spec(H100, GpuSpec))
    s = gpu.spec.clock
    (k,) = flash_decode("attention", 64, 32, 8, 32768, 128, gpu)
    assert k.keys == 32768
    (r,) = simulate_gpu([(k, 0)], gpu, mode="stream").kernels
    t = r.end_s - r.start_s
    a16 = s.attention[1]
    assert a16.tokens == 16384
    anchor_w = s.idle_w + (s.power_limit_w - s.idle_w) * a16.slowdown
    want = s.idle_w + (anchor_w - s.idle_w) * (k.flops / t) / a16.rate
    assert kernel_power_w(s, "attention", k.flops, k.bytes, t, k.keys) == pytest.approx(
        want, rel=1e-12
    )
    assert 670 < want < s.power_limit_w
    full, hot = _decode_step_s(gpu, 64, 32768)
    assert hot == pytest.approx(full, rel=1e-9)


def test_h200_decode_at_8k_moves_under_sustained_clock() -> None:
    """H200, batch 128 x 8K graph decode: its FA2 kernels (320 TFLOP/s against the 4K anchor,
    711 W) hold the average over the limit: 61.80 -> 62.77 ms (x1.0157) under ``clock: sustained``
    (61.72 -> 62.69, x1.0158, before RMSNorm's weight came from DRAM in a step: its 65 norms +1.31
    us each, P12)."""
    full, hot = _decode_step_s(Gpu(load_spec(H200, GpuSpec)), 128, 8192)
    assert full == pytest.approx(61.801e-3, rel=1e-4)
    assert hot / full == pytest.approx(1.01569, abs=1e-4)


def test_engine_counts_the_gap_between_kernels_as_idle() -> None:
    """Two 4096^3 GEMMs (0.2 ms each, at full clock throughout) with a 10 ms host launch before
    each (``launch.stream`` set to 10 ms): the controller's average after the pass is, in closed
    form, a1 = P + (idle - P) e^(-w / fall) after the first, a2 = idle + (a1 - idle) e^(-g / rise)
    after the gap g, P + (a2 - P) e^(-w / fall) after the second. Without the engine's
    ``clock.idle`` for the gap it would be P + (a1 - P) e^(-w / fall), 0.27 W higher."""
    base = load_spec(H100, GpuSpec)
    gpu = Gpu(
        base.model_copy(update={"launch": base.launch.model_copy(update={"stream_s": 10e-3})})
    )
    s = gpu.spec.clock
    ks = [(k, 0) for k in gemm("g", 4096, 4096, 4096, gpu)] * 2
    c = SmClock(s)
    trace = simulate_gpu(ks, gpu, mode="stream", clock=c)
    assert trace.kernels == simulate_gpu(ks, gpu, mode="stream").kernels  # full clock throughout
    r1, r2 = trace.kernels
    w = r1.end_s - r1.start_s - r1.launch_sync_s
    g = r2.start_s - r1.end_s + r2.launch_sync_s
    assert w < STEP_S and 10e-3 < g < 10.1e-3
    k = ks[0][0]
    p = kernel_power_w(s, "gemm", k.flops, k.bytes, w)
    fall, rise = math.exp(-w / s.fall_window_s), math.exp(-g / s.rise_window_s)
    a1 = p + (s.idle_w - p) * fall
    a2 = s.idle_w + (a1 - s.idle_w) * rise
    assert c.average_w == pytest.approx(p + (a2 - p) * fall, rel=1e-12)
    assert (p + (a1 - p) * fall) - c.average_w > 0.2


def test_sustained_step_that_does_not_settle_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from rdusim.analysis.gpu import predict
    from rdusim.errors import SimulationError

    gpu = Gpu(load_spec(H100, GpuSpec))
    spec, model, _ = predict.load_gpu_mapping(ROOT / "mappings/llama-3.1-8b/decode-h100.yaml")
    monkeypatch.setattr(predict, "SUSTAINED_MAX_STEPS", 1)
    with pytest.raises(SimulationError, match="did not settle within 1 steps"):
        predict.sustained_gpu_step(
            model,
            gpu,
            layer=spec.layer,
            head=spec.head,
            phase="decode",
            batch=1,
            seq_len=1024,
            mode="graph",
        )


def test_slew_controller_settles_where_the_anchor_drew_the_limit() -> None:
    """SlewSmClock: an anchor given as slowdown s draws idle + (limit - idle) s^a at full clock, and
    the clock that holds that average is 1/s: the GEMM settles at run v's 1 / 1.325 whatever a."""
    s = spec()
    p = kernel_power_w(s, "gemm", s.gemm.rate, 0.0, 1.0, exponent=s.power_exponent)
    assert p == pytest.approx(s.idle_w + (s.power_limit_w - s.idle_w) * 1.325**s.power_exponent)
    c = SlewSmClock(s)
    c.run(2.0, p, "attention")
    assert 1 / c.share == pytest.approx(1.325, rel=1e-6)


def test_slew_controller_rises_at_its_rate() -> None:
    """After the GEMM's burst, idle brings the clock back at rise_rate (share per s): to 0.98 of
    full in (0.98 - 1 / 1.325) / rise_rate, run v's 65 ms."""
    s = spec()
    assert s.rise_rate is not None
    p = kernel_power_w(s, "gemm", s.gemm.rate, 0.0, 1.0, exponent=s.power_exponent)
    c = SlewSmClock(s)
    c.run(2.0, p, "attention")
    start = c.share
    c.idle(0.010)
    assert c.share == pytest.approx(start + 0.010 * s.rise_rate, rel=1e-9)
    t = (0.98 - start) / s.rise_rate
    assert t == pytest.approx(0.065, abs=0.002)


def test_slew_controller_is_opt_in_and_needs_its_rate() -> None:
    """The frozen controller is untouched (its power at exponent 1); SlewSmClock refuses a clock
    section without rise_rate."""
    s = spec()
    assert kernel_power_w(s, "gemm", s.gemm.rate, 0.0, 1.0) == pytest.approx(
        s.idle_w + (s.power_limit_w - s.idle_w) * 1.325
    )
    with pytest.raises(ValueError, match="rise_rate"):
        SlewSmClock(s.model_copy(update={"rise_rate": None}))
