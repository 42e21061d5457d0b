"""Run ag's held-out GEMMs (benchmarks/gpu/gemm_shapes.py, gemm_holdout.py, sweep.py's
``gemm_holdout`` section): new shapes only, predictions frozen from today's model, and the
section runs (on the CPU, tiny shapes) through the loop the ``gemm`` section uses."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest

from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu

from .scripts import ROOT, SCRIPTS, bench_script

FROZEN = SCRIPTS / "h100-20261128ag-gemm-holdout-predicted.txt"


def _committed_shapes() -> set[tuple[int, int, int]]:
    """(m, n, k) of every row of every committed CSV under benchmarks/gpu, the held-out runs' own
    (``*-gemm-holdout*``: run ag, its repeat run ai, later leases of the same shapes) left out."""
    out = set()
    for path in SCRIPTS.glob("*.csv"):
        if "-gemm-holdout" in path.name:
            continue
        with path.open() as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames or not {"m", "n", "k"} <= set(reader.fieldnames):
                continue
            for r in reader:
                try:
                    out.add((int(float(r["m"])), int(float(r["n"])), int(float(r["k"]))))
                except ValueError:
                    continue
    return out


def test_holdout_shapes_are_new() -> None:
    """844 shapes of ten families, each (m, n, k) once, none measured by any committed run."""
    shapes = bench_script("gemm_shapes").holdout_shapes()
    keys = [(m, n, k) for _, _, _, n, k, m in shapes]
    assert len(keys) == len(set(keys)) == 844
    assert len({s[0] for s in shapes}) == 10
    assert not set(keys) & _committed_shapes()


def test_gemm_section_rows_unchanged() -> None:
    """The ``gemm`` section's plan names run a's 1452 GEMM rows in run a's order."""
    shapes = bench_script("gemm_shapes")
    names = [
        f"{f}_tp{tp}_{op}_m{m}" for f, tp, op, _, _, m in shapes.plan_shapes(shapes.gemm_plan())
    ]
    with (SCRIPTS / "h100-20261125-sweep.csv").open() as fh:
        run_a = [r["name"] for r in csv.DictReader(fh) if r["kind"] == "gemm" and r["set"] != "p10"]
    assert names == run_a


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_frozen_holdout_predictions_are_todays(gpu: str) -> None:
    """Each GPU's frozen file (run ag's H100, run aj's H200) is what today's model gives (to 1 ns),
    row for row, tile and split-K too."""
    mod = bench_script("gemm_holdout")
    which = mod.RUNS[gpu]
    frozen = mod.read_frozen(ROOT / which.frozen)
    mine = mod.predicted_rows(Gpu(load_spec(ROOT / which.spec, GpuSpec)))
    assert [r["name"] for r in mine] == list(frozen)
    for r in mine:
        f = frozen[r["name"]]
        assert float(r["predicted_us"]) == pytest.approx(float(f["predicted_us"]), abs=1e-3)
        assert (r["bn"], r["bm"], r["splits"]) == (int(f["bn"]), int(f["bm"]), int(f["splits"]))


def test_holdout_section_dry_run_on_cpu() -> None:
    """sweep.py's gemm_holdout section on the CPU with three tiny shapes: rows of set ``holdout``
    with the shape, family, TP and op (the profiler pass may fail there; the rows stay)."""
    torch = pytest.importorskip("torch")
    sweep = bench_script("sweep")
    ctx = sweep.M.Ctx(device=torch.device("cpu"), tiny=True)
    shapes = [
        ("llama2-7b", 8, "qkv", 48, 32, 3),
        ("qwen3-30b-a3b", 1, "expert_down", 32, 24, 24),
        ("qwen3-30b-a3b", 1, "expert_down", 32, 24, 96),
    ]
    sweep._gemm_pass(ctx, shapes, lambda fam, tp, m: "holdout", [])
    assert [r["name"] for r in ctx.rows] == [
        "llama2-7b_tp8_qkv_m3",
        "qwen3-30b-a3b_tp1_expert_down_m24",
        "qwen3-30b-a3b_tp1_expert_down_m96",
    ]
    assert {r["set"] for r in ctx.rows} == {"holdout"}
    assert (ctx.rows[1]["m"], ctx.rows[1]["n"], ctx.rows[1]["k"]) == (24, 32, 24)
    assert "family=qwen3-30b-a3b;tp=1;op=expert_down" in ctx.rows[1]["extra"]
    assert sweep.SECTIONS["gemm_holdout"] is sweep.gemm_holdout_rows


def test_run_ag_comparison_reproduces() -> None:
    """The committed comparison of run ag is what ``gemm_holdout.py compare`` prints today."""
    mod = bench_script("gemm_holdout")
    text = "\n".join(mod.compare(ROOT / mod.RUN, ROOT / mod.KERNELS, ROOT / mod.FROZEN)) + "\n"
    assert text == (SCRIPTS / "h100-20261128ag-gemm-holdout-compare.txt").read_text()


def test_run_aj_diagnostics() -> None:
    """Run aj's Nsight rows (gemm_holdout_mechanisms.py): Phi-3-medium's m = 192 kernel reads the
    weight 1.75x from DRAM, 384 x 28672 x 4096 (more tiles than its grid too) 1.04x; and the fine
    sweep's spikes are counted from the committed CSVs."""
    mech = bench_script("gemm_holdout_mechanisms")
    lines = mech.ncu_lines()
    assert len(lines) == 2 + len(mech.NCU_SHAPES)
    assert "| 1.75 |" in next(line for line in lines if line.startswith("| 192 x 35840 x 5120 |"))
    assert "| 1.04 |" in next(line for line in lines if line.startswith("| 384 x 28672 x 4096 |"))
    assert lines[-1].count("|") == 9
    assert mech.spike_lines()[-1].startswith("7 spikes in 184 interior points")


def _padded(extent: int, side: int, cluster: int) -> int:
    """Tiles of ``side`` over ``extent``, rounded up to whole clusters of ``cluster`` tiles."""
    return math.ceil(math.ceil(extent / side) / cluster) * cluster


def test_tile_reads_the_first_side_along_n() -> None:
    """``gemm_holdout._tile`` reads ``nvjet ... AxB`` as A along n, B along m for TNT and TNN alike:
    of run aj's diagnostic launch grids, those equal to one reading's tile count (clusters padded
    to whole clusters) equal this one's, 74 TNN and 133 TNT, none only the other's."""
    tile = bench_script("gemm_holdout")._tile
    assert tile("nvjet_sm90_tst_448x64_64x3_4x1_v_bz_coopB_TNN") == (448, 64)
    assert tile("nvjet_sm90_tst_320x64_64x4_4x1_v_bz_TNT") == (320, 64)
    count = {}
    path = SCRIPTS / "h200-20261128aj-gemm-holdout-diag-kernels.csv"
    with path.open() as fh:
        for r in csv.DictReader(fh):
            hit = re.search(r"_\d+x\d+_64x\d+_(\d)x(\d)_", r["kernel"])
            if not hit or "splitK" in r["kernel"]:
                continue
            (a, b), (c1, c2) = tile(r["kernel"]), (int(hit[1]), int(hit[2]))
            m, n = int(r["m"]), int(r["n"])
            grid = math.prod(json.loads(r["grid"]))
            first_n = _padded(n, a, c1) * _padded(m, b, c2)
            first_m = _padded(m, a, c1) * _padded(n, b, c2)
            if first_n != first_m and grid in (first_n, first_m):
                key = (r["kernel"][-3:], "n" if grid == first_n else "m")
                count[key] = count.get(key, 0) + 1
    assert count == {("TNN", "n"): 74, ("TNT", "n"): 133}
