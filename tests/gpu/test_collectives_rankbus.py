"""benchmarks/gpu/collectives_rankbus.py: the bus fitted per op and rank count from the committed
CSVs (docs/gpu.md, run an's "The fitted bus is 5% above the document's"), pinned so that a changed
CSV, fit rule or memory-operation count fails here."""

from __future__ import annotations

import csv
import types

import pytest

from rdusim.analysis.gpu.collectives import fit_bus_bandwidth

from .scripts import ROOT, bench_script

MIB = 1 << 20


@pytest.fixture(scope="module")
def rb() -> types.ModuleType:
    return bench_script("collectives_rankbus")


@pytest.fixture(scope="module")
def fits(rb: types.ModuleType) -> dict:
    return {k: sum(v) / len(v) for k, v in rb.fitted().items()}


def test_reprints_the_committed_tables(rb: types.ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert rb.main([]) == 0
    committed = (ROOT / "benchmarks/gpu/h200x4-20261128an-rank-bus.txt").read_text()
    assert capsys.readouterr().out == committed


def test_all_reduce_rate_is_the_fit(rb: types.ModuleType) -> None:
    """The stream all-reduce's wire rate is fit_bus_bandwidth on every run (361.1, 361.5 and 345.2
    on run an's host, as docs/gpu.md quotes)."""
    quoted = {"an": 361.1, "an repeat": 361.5, "an, GPUs 0-1": 345.2, "aa": 344.0}
    for _, label, name in rb.RUNS:
        rows = rb.load(name)
        n = rb.ranks_of(rows)
        with open(rb.GPU_DIR / name, newline="") as f:
            fit = fit_bus_bandwidth(list(csv.DictReader(f))) / 1e9
        assert rb.wire_rate(rows[("all_reduce", "stream", n)], "all_reduce", n) == pytest.approx(fit, rel=1e-12)
        if label in quoted:
            assert round(fit, 1) == quoted[label]


def test_the_op_rule_and_a_common_rank_factor(rb: types.ModuleType, fits: dict) -> None:
    """The ring ops' 4-rank over 2-rank rate, over the factor the model's memory-operation rule
    already gives them, is one factor of 1.04-1.07 for all three on both GPUs."""
    assert rb.op_model_factor("all_reduce") == 1.0
    assert rb.op_model_factor("all_gather") == pytest.approx((10 / 3 / (11 / 3)) / (4 / 5))
    for gpu in ("H200", "H100"):
        left = [
            fits[(gpu, 4, op)] / fits[(gpu, 2, op)] / rb.op_model_factor(op)
            for op in ("all_reduce", "all_gather", "reduce_scatter")
        ]
        assert all(1.04 < x < 1.07 for x in left), (gpu, left)
        assert max(left) - min(left) < 0.01
    assert fits[("H200", 4, "all_reduce")] / fits[("H200", 2, "all_reduce")] == pytest.approx(1.054, abs=5e-4)
    assert fits[("H100", 4, "all_reduce")] / fits[("H100", 2, "all_reduce")] == pytest.approx(1.064, abs=5e-4)


def test_no_rate_set_by_memory_operations_alone(fits: dict) -> None:
    """The 4-rank all-gather and reduce-scatter (3.67 operations a wire byte) run slower than the
    2-rank all-reduce (4.00): no rate that falls with the operations alone, capped or not."""
    for gpu in ("H200", "H100"):
        for op in ("all_gather", "reduce_scatter"):
            assert fits[(gpu, 4, op)] < fits[(gpu, 2, "all_reduce")]
        # and the all-reduce's own rule across ranks would give 4 / 3.33 = 1.2, not ~1.06
        assert fits[(gpu, 4, "all_reduce")] / fits[(gpu, 2, "all_reduce")] < 1.1


def test_the_gap_outlasts_the_ramp(rb: types.ModuleType) -> None:
    """Between 512 MiB and 1 GiB (past the Simple ramp's end) the 4-rank all-reduce moves its wire
    bytes faster than the 2-rank one on every pair of runs, and >= 4% faster on the mean."""
    last: dict[tuple[str, int], list[float]] = {}
    for gpu, _, name in rb.RUNS:
        rows = rb.load(name)
        n = rb.ranks_of(rows)
        rate = rb.wire_rate(rows[("all_reduce", "stream", n)], "all_reduce", n, 512 * MIB, 1024 * MIB)
        last.setdefault((gpu, n), []).append(rate)
    for gpu in ("H200", "H100"):
        four, two = last[(gpu, 4)], last[(gpu, 2)]
        assert min(four) > max(two)
        assert sum(four) / len(four) > 1.04 * sum(two) / len(two)


def test_run_w_all_reduce_rises_with_the_ranks(rb: types.ModuleType) -> None:
    rates = [float(line.split("|")[2]) for line in rb.run_w_table()[2:]]
    assert rates == sorted(rates) and rates == [310.0, 336.0, 347.0]


def test_a_cost_per_call_would_need_tens_of_us(rb: types.ModuleType) -> None:
    """NCCL's ring loop (n chunks of 2 MiB a channel, 2(n-1)+1 calls a loop): 24 calls added from
    256 MiB to 1 GiB on 2 ranks, 28 on 4; one wire rate would need 22-27 us a call, where run v's
    NCCL_BUFFSIZE variants measured at most 1.2 us an added slice."""
    assert rb.primitive_calls(256 * MIB, 2) == 3 * 3 and rb.primitive_calls(1024 * MIB, 2) == 11 * 3
    assert rb.primitive_calls(256 * MIB, 4) == 2 * 7 and rb.primitive_calls(1024 * MIB, 4) == 6 * 7
    fits = rb.fitted()
    assert rb.per_call_cost_us("H200", fits) == pytest.approx(22.5, abs=0.05)
    assert rb.per_call_cost_us("H100", fits) == pytest.approx(26.7, abs=0.05)


def test_docs_table_is_the_fit(rb: types.ModuleType, fits: dict) -> None:
    """docs/gpu.md's condensed table (run an, "The fitted bus is 5% above the document's") carries
    the script's figures."""
    doc = (ROOT / "docs/gpu.md").read_text()
    for op, ops in (("all_reduce", "4.00 / 3.33"), ("all_gather", "5.00 / 3.67"), ("reduce_scatter", "5.00 / 3.67")):
        cells = [op.replace("_", "-"), ops]
        for gpu in ("H200", "H100"):
            two, four = fits[(gpu, 2, op)], fits[(gpu, 4, op)]
            cells += [f"{two:.1f} / {four:.1f}", f"{four / two / rb.op_model_factor(op):.3f}"]
        assert "  | " + " | ".join(cells) + " |\n" in doc
