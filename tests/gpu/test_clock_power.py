"""Run v's clock and power measurement (benchmarks/gpu/clock_power.py) and its analysis: the
committed tables in docs/gpu.md are what the analysis gives on the committed files, line for
line; the pieces of the analysis on constructed rows."""

from __future__ import annotations

import pytest

from .scripts import ROOT, bench_script, doc_block

PREFIX = str(ROOT / "benchmarks/gpu/h100-20261125v-clock")


def _module(name: str):  # type: ignore[no-untyped-def]
    return bench_script(name)


def test_run_v_tables_in_the_doc_are_the_analysis_of_the_committed_files() -> None:
    a = _module("clock_power_analysis")
    events, nvml, _summary = a.load(PREFIX)
    assert "\n".join(a.tables(events, nvml)).splitlines() == doc_block("p12-clock-run-v")


def test_run_s_table_in_the_doc_is_the_analysis_of_run_s() -> None:
    a = _module("clock_power_analysis")
    lines = a.run_s_table(ROOT / "benchmarks/gpu")
    assert lines[2:] == doc_block("p12-clock-run-s")


def test_heldout_table_in_the_doc_is_the_measured_factor_on_the_earlier_rows() -> None:
    a = _module("clock_power_analysis")
    assert a.heldout(1.080, only_hd128=True) == doc_block("p12-clock-heldout")


def test_the_held_out_factor_is_run_v_s_crossed_row() -> None:
    """1.080 is the 4K prefill's first 5 calls right after the 128K burst over its cold calls."""
    a = _module("clock_power_analysis")
    events, nvml, _summary = a.load(PREFIX)
    pts = a.calls_with_clock(a._phase(events, "fa2_prefill_4k", "after_fa2_prefill_128k"))
    cold = a.workload_row(events, nvml, "fa2_prefill_4k")["cold_us"]
    assert round(a._med([p[1] for p in pts[:5]]) / cold, 3) == 1.080


def test_inverse_clock_fit_recovers_its_coefficients() -> None:
    a = _module("clock_power_analysis")
    pts = [(0.0, 100.0 + 400.0 * a.FULL_MHZ / f, f) for f in (1980.0, 1800.0, 1650.0, 1500.0)]
    fa, fb = a.fit_inverse_clock(pts)
    assert fa == pytest.approx(100.0, abs=1e-9)
    assert fb == pytest.approx(400.0, abs=1e-9)


def test_a_call_takes_the_mean_clock_of_the_probes_beside_it_but_not_a_lead_probe() -> None:
    a = _module("clock_power_analysis")

    def row(kind: str, t: float, us: float, mhz: str = "") -> dict[str, str]:
        return {"kind": kind, "t": str(t), "us": str(us), "probe_mhz": mhz}
    rows = [row("probe2000000", 0.0, 1000.0, "1000.0"), row("call", 0.001, 500.0),
            row("probe40000", 0.0015, 20.0, "1900.0"), row("call", 0.0016, 510.0), row("probe40000", 0.0021, 20.0, "1700.0")]
    assert a.calls_with_clock(rows) == [(0.001, 500.0, 1900.0), (0.0016, 510.0, 1800.0)]


def test_the_dry_run_plan_has_every_workload_in_every_phase() -> None:
    c = _module("clock_power")
    plan = c.plan()
    for w in c.WORKLOADS:
        assert {r["phase"] for r in plan if r["workload"] == w.name} >= {"cold", "burst", "recovery"}
    assert {r["phase"] for r in plan if r["workload"] == "fa2_prefill_4k"} >= {"after_fa2_prefill_128k", "after_gemm_8192"}
    assert len(plan) == 3 * len(c.WORKLOADS) + len(c.CROSS) + 1
