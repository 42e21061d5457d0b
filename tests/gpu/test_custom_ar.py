"""benchmarks/gpu/custom_ar.py (runs cw to db): CLI validation, vLLM's grid in the plan, the chase's
cycle, and the calibration closing on rows the model itself wrote (it recovers its constants; every
registered check then reads 0%)."""

from __future__ import annotations

import csv
import types
from pathlib import Path

import numpy as np
import pytest

from rdusim.hw.custom_all_reduce import CustomArLink

from .scripts import bench_script

MIB = 1 << 20
GPU = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"


@pytest.fixture(scope="module")
def car() -> types.ModuleType:
    return bench_script("custom_ar")


def test_bad_flags_exit_2(car: types.ModuleType) -> None:
    for argv in (["--per", "0", "--dry-run"], ["--reps", "-1", "--dry-run"], []):
        with pytest.raises(SystemExit) as exc:
            car.main(argv)
        assert exc.value.code == 2


def test_the_plan_keeps_vllms_grid(car: types.ModuleType) -> None:
    rows = car.plan(100, 7)
    vllm = {r["bytes"]: r["blocks"] for r in rows if r["variant"] == "1stage-b36"}
    assert (vllm[1024], vllm[16384], vllm[262144], vllm[524288], vllm[64 * MIB]) == (1, 2, 32, 36, 36)
    assert {(r["variant"], r["bytes"]) for r in rows} >= {(v, b) for v, b in car.CALIBRATION}
    assert all(r["per"] <= 100 and r["per"] * 40_000 < 10_000_000 for r in rows)  # the sleep outlasts the queueing


def test_the_chase_is_one_cycle_through_every_slot(car: types.ModuleType) -> None:
    nxt = car.chase_cycle(64 * 256)
    step, seen, i = 256 // 4, set(), 0
    for _ in range(64):
        assert i % step == 0 and i not in seen
        seen.add(i)
        i = int(nxt[i])
    assert i == 0 and len(seen) == 64 and np.count_nonzero(nxt) == 63


def test_calibration_recovers_the_models_own_constants(car: types.ModuleType, tmp_path: Path) -> None:
    # run cx's procedure calibrates run cx's model, a pass whatever the blocks (no queue at the link)
    link = CustomArLink(load_s=0.81e-6, per_load_s=0.21e-6, flag_s=0.69e-6, read_bytes_per_s=318e9, kernel_s=2.3e-6,
                        queue=False)
    path = tmp_path / "cx.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=car.FIELDS)
        writer.writeheader()
        writer.writerow({"kind": "pingpong", "variant": "flag", "stages": "", "limit": "", "blocks": 1, "bytes": 4,
                         "per": 1, "reps": 1, "median_us": 0.69, "ok": True, "gpu": "x"})
        writer.writerow({"kind": "chase", "variant": "peer", "stages": "", "limit": "", "blocks": 1, "bytes": 16 * MIB,
                         "per": 1, "reps": 1, "median_us": 0.81, "ok": True, "gpu": "x"})
        for r in car.plan(100, 7):
            writer.writerow({**r, "median_us": car.predicted_us({**r, "stages": str(r["stages"])}, link), "ok": True,
                             "gpu": "x"})
    got = car.calibrate(car.load(str(path)))
    assert (got.load_s, got.per_load_s) == (pytest.approx(link.load_s, rel=1e-9), pytest.approx(link.per_load_s, rel=1e-6))
    assert got.read_bytes_per_s == pytest.approx(link.read_bytes_per_s, rel=1e-6)
    assert got.kernel_s == pytest.approx(link.kernel_s, rel=1e-6)
    table = car.compare(str(path))
    checks = [line for line in table if line.startswith("| C")]
    assert len(checks) == len(car.CHECKS) and all("| 0.0% |" in line and line.endswith("| yes |") for line in checks)


def test_run_cx_reproduces_and_the_documents_carry_its_constants(car: types.ModuleType,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Run cx's committed comparison is what the script prints now, and h200.yaml's (and h100.yaml's,
    carried) nvlink.custom_all_reduce is run cx's calibration, rounded as registered: its flag, kernel,
    reads' link and one-load pass, split by run di's lone-block slope (per_load)."""
    from rdusim.hw.gpu import load_gpu_node

    monkeypatch.chdir(GPU.parents[1])  # the table names the CSV as the repository's path
    cx = GPU / "h200x2-20261130cx-custom-ar.csv"
    assert "\n".join(car.compare(str(cx.relative_to(GPU.parents[1])))) + "\n" == \
        (GPU / "h200x2-20261130cx-compare.txt").read_text()
    got = car.calibrate(car.load(str(cx)))
    slope = car.di_line()[1]
    for doc in ("h200", "h100"):
        spec = load_gpu_node(GPU.parents[1] / f"hw_configs/{doc}.yaml").gpu.spec.nvlink.custom_all_reduce
        assert [round(x * 1e8) for x in (spec.flag_s, spec.kernel_s, spec.load_s + spec.per_load_s)] == \
            [round(x * 1e8) for x in (got.flag_s, got.kernel_s, got.pass_at(1))]  # a one-load pass: run cx's
        assert round(spec.per_load_s * 1e9) == round(slope * 1e3)  # run di's line (adopted by its rule)
        assert spec.read_bytes_per_s == pytest.approx(round(got.read_bytes_per_s / 1e8) * 1e8)


def test_run_cy_reproduces_and_the_documents_carry_run_dcs_flat_fence(car: types.ModuleType,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Run cy's frozen table and comparison are what the script prints now; F1 failed as registered (run ct's
    fence line grows with the blocks, run cy's kernel alone does not). The documents carry run dc's flat
    fence instead, adopted by run de's K3: run cy's empty two-stage kernel less the model's empty kernel,
    nothing for further blocks."""
    from rdusim.hw.gpu import load_gpu_node

    monkeypatch.chdir(GPU.parents[1])
    assert "\n".join(car.frozen_cy()) + "\n" == (GPU / "h200x2-20261130cy-predicted.txt").read_text()
    table = car.compare_cy("benchmarks/gpu/h200x2-20261130cy-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / "h200x2-20261130cy-compare.txt").read_text()
    assert [line.split("|")[-2].strip() for line in table if line.startswith("| F")] == ["no", "yes", "yes"]
    for doc in ("h200", "h100"):
        spec = load_gpu_node(GPU.parents[1] / f"hw_configs/{doc}.yaml").gpu.spec.nvlink.custom_all_reduce
        assert (round(spec.fence_s * 1e8), spec.fence_per_block_s) == (round(car.dc_fence_s() * 1e8), 0.0)


@pytest.mark.parametrize(("run", "verdicts"), [
    ("dc", ["no", "yes", "no"]), ("de", ["no", "no", "yes", "yes"]), ("df", ["no", "no"])])
def test_runs_dc_de_and_df_reproduce(car: types.ModuleType, monkeypatch: pytest.MonkeyPatch, run: str,
                                     verdicts: list[str]) -> None:
    """Runs dc's, de's and df's frozen tables and comparisons are what the script prints now, with their
    registered verdicts: the flat fence holds on its own (H2) and with vLLM's compiled kernel (K3), not on
    the emulation's two-stage passes (H1); vLLM's compiled loop fails run db's pass (K1) and run df's line
    (L1)."""
    monkeypatch.chdir(GPU.parents[1])
    frozen = {"dc": car.frozen_dc, "de": car.frozen_de, "df": lambda: car.frozen_passes(car.df_run())}[run]()
    assert "\n".join(frozen) + "\n" == (GPU / f"h200x2-20261130{run}-predicted.txt").read_text()
    compare = {"dc": car.compare_dc, "de": car.compare_de, "df": lambda p: car.compare_passes(car.df_run(), p)}[run]
    table = compare(f"benchmarks/gpu/h200x2-20261130{run}-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / f"h200x2-20261130{run}-compare.txt").read_text()
    assert [line.split("|")[-2].strip() for line in table if line.startswith(("| H", "| K", "| L"))] == verdicts


def test_run_dd_vllms_compiled_kernel_is_faster_than_the_emulation(car: types.ModuleType,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Run dd's comparison is what the script prints now; vLLM's compiled form (vllm_ar_t) ran every row
    faster than the emulation (vllm_ar_n): J1 and J2 fail; its four blocks through 16 MiB ran as run cx's
    calibration row did (516.4 us)."""
    monkeypatch.chdir(GPU.parents[1])
    table = car.compare_dd("benchmarks/gpu/h200x2-20261130dd-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / "h200x2-20261130dd-compare.txt").read_text()
    assert [line.split("|")[-2].strip() for line in table if line.startswith("| J")] == ["no", "no"]
    rows = [line.split("|") for line in table if line.startswith("| 1stage-b4 |")]
    assert float(rows[0][5]) == pytest.approx(516.4, rel=0.005) and float(rows[0][4]) > 1.09 * float(rows[0][5])


def test_the_script_and_the_table_calibrate_on_the_same_rows(car: types.ModuleType) -> None:
    """custom_ar.py keeps its own copy of the calibration rows (a measurement run never imports rdusim)."""
    from rdusim.analysis.gpu.collectives import CUSTOM_AR_CALIBRATION

    assert frozenset(car.CALIBRATION) == CUSTOM_AR_CALIBRATION


def test_run_cz_reproduces_and_its_pass_with_three_peers(car: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run cz's frozen table and comparison are what the script prints now; its four blocks through 16 MiB
    on four GPUs pass in 1.39 us (the two-GPU constants: 1.00), the known miss docs/gpu.md gives."""
    monkeypatch.chdir(GPU.parents[1])
    assert "\n".join(car.frozen_cz()) + "\n" == (GPU / "h200x4-20261130cz-predicted.txt").read_text()
    table = car.compare_cz("benchmarks/gpu/h200x4-20261130cz-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / "h200x4-20261130cz-compare.txt").read_text()
    assert [line.split("|")[-2].strip() for line in table if line.startswith("| D")] == ["no", "no", "no", "yes", "yes"]
    rows = car.load(str(GPU / "h200x4-20261130cz-custom-ar.csv"))
    passes = 16 * MIB // car.PACK // (4 * car.THREADS)
    one = (car._row(rows, "1stage-b4", 16 * MIB) - car._row(rows, "empty-b36", 0)) / passes
    assert one == pytest.approx(1.39, abs=0.01)


def test_the_script_keeps_vllms_constants_as_rdusim_does(car: types.ModuleType) -> None:
    """custom_ar.py keeps its own copy of vLLM's threads, block limit, pack and grid (a measurement run
    never imports rdusim): the same as rdusim.hw.custom_all_reduce's."""
    from rdusim.hw.custom_all_reduce import (
        VLLM_BLOCK_LIMIT,
        VLLM_PACK_BYTES,
        VLLM_THREADS,
        custom_ar_blocks,
    )

    assert (car.THREADS, car.BLOCK_LIMIT, car.PACK) == (VLLM_THREADS, VLLM_BLOCK_LIMIT, VLLM_PACK_BYTES)
    for size in (16, 8 << 10, (8 << 10) + 16, 288 << 10, 289 << 10, *car.SIZES, *car.CY_SIZES):
        for limit in (1, 4, 36, 132):
            assert car.vllm_blocks(size, limit) == custom_ar_blocks(size, limit)


@pytest.mark.parametrize(("run", "verdicts"), [("da", ["yes", "no", "yes"]), ("db", ["yes", "yes", "yes"])])
def test_runs_da_and_db_reproduce(car: types.ModuleType, monkeypatch: pytest.MonkeyPatch, run: str,
                                  verdicts: list[str]) -> None:
    """Runs da's and db's frozen tables and comparisons are what the script prints now: run da's form (a
    block's bytes at a rate) failed E2, run db's (a load a thread whatever the threads) passed G1 and G3,
    its adoption rule (G2 reported)."""
    monkeypatch.chdir(GPU.parents[1])
    pass_run = car.da_run() if run == "da" else car.db_run()
    assert "\n".join(car.frozen_passes(pass_run)) + "\n" == (GPU / f"h200x2-20261130{run}-predicted.txt").read_text()
    table = car.compare_passes(pass_run, f"benchmarks/gpu/h200x2-20261130{run}-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / f"h200x2-20261130{run}-compare.txt").read_text()
    assert [line.split("|")[-2].strip() for line in table if line.startswith(("| E", "| G"))] == verdicts


def test_a_pass_grows_with_a_threads_loads_and_run_cz_is_explained_after(car: types.ModuleType,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Run da's passes at 512 threads and 4 blocks rise with the loads a thread keeps in flight (from one
    peer), about 0.2 us each; its three loads pass in run cz's 1.39 us with three peers. The document's
    model now (after run di) puts run cz's passes with three peers within D3, the table committed."""
    monkeypatch.chdir(GPU.parents[1])
    slopes = car.pass_slopes(car.load("benchmarks/gpu/h200x2-20261130da-custom-ar.csv"), car.da_configs())
    at512 = {p["loads"]: p["pass_us"] for p in slopes if (p["threads"], p["blocks"]) == (512, 4)}
    assert [round(at512[k], 2) for k in (1, 2, 3, 4, 5, 7)] == [1.07, 1.23, 1.37, 1.53, 1.73, 2.13]
    table = car.compare_cz_now("benchmarks/gpu/h200x4-20261130cz-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / "h200x4-20261130cz-now.txt").read_text()
    assert [line.split("|")[-2].strip() for line in table if line.startswith("| D")] == ["no", "no", "yes", "yes", "yes"]


def test_run_dg_is_frozen_as_h200_yaml_stood(car: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run dg (four GPUs, not run yet) is frozen: its table is what the script prints from its own record
    of h200.yaml as registered, whatever the document says later; its rows are vLLM's compiled kernel on
    four ranks, and its spread passes read three distinct peers."""
    monkeypatch.chdir(GPU.parents[1])
    assert "\n".join(car.frozen_dg()) + "\n" == (GPU / "h200x4-20261130dg-predicted.txt").read_text()
    rows = car.plan(100, 7, "dg")
    assert {r["ranks"] for r in rows} == {4} and {r["kernel"] for r in rows} == {"t"}
    spread = [r for r in rows if r.get("spread")]
    assert {r["variant"] for r in spread} == {f"pass-k3-t512-b{b}-spread" for b in (1, 4, 10)}
    # the addendum: the same rows frozen on the documents after run di (its record), checks P1-P5
    assert "\n".join(car.frozen_dg_di()) + "\n" == (GPU / "h200x4-20261130dg-predicted-after-di.txt").read_text()
    assert car.h200_after_di().queue and not car.dg_link().queue
    assert list(car.DG_DI_CHECKS) == ["P1", "P2", "P3", "P4", "P5"]


def test_run_dh_survey_reproduces(car: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run dh's surface is what the script prints now: at one block a pass grows a little with a thread's
    loads; at sixteen blocks and seven loads it is the reads' link's (2.74 us against its 2.80)."""
    monkeypatch.chdir(GPU.parents[1])
    table = car.survey_dh("benchmarks/gpu/h200x2-20261130dh-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / "h200x2-20261130dh-survey.txt").read_text()
    seven = [line for line in table if line.startswith("| 7 |")][0].split("|")
    assert seven[2].strip().startswith("1.25") and seven[6].strip() == "2.739 (2.80)"


def test_run_di_is_frozen_on_the_lone_block_line(car: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run di (not run yet) is frozen: its table is what the script prints; its line is the lone-block passes'
    least squares (runs de, df, dh); form B is the closed network, at one block the line itself, never under
    form A nor over it by more than the blocks' queueing allows, and the link's once the blocks' bytes fill it."""
    monkeypatch.chdir(GPU.parents[1])
    assert "\n".join(car.frozen_di()) + "\n" == (GPU / "h200x2-20261130di-predicted.txt").read_text()
    intercept, slope = car.di_line()
    assert (round(intercept, 4), round(slope, 4)) == (0.9164, 0.047)
    line = (intercept, slope)
    for k in (1, 3, 7):
        lone = intercept + k * slope
        assert car.di_mva_pass_us(k, 512, 1, line) == pytest.approx(lone, rel=1e-12)
        for b in (2, 8, 36):
            a, mva = car.di_max_pass_us(k, 512, b, line), car.di_mva_pass_us(k, 512, b, line)
            link = b * car.di_link_us(k, 512)
            assert a <= mva + 1e-12 and mva <= lone + link + 1e-12  # at most a lone pass with every block queued ahead
    assert {r["variant"] for r in car.plan(100, 7, "di")} >= {"pass-k7-t512-b36", "pass-k6-t384-b16"}
    assert "pass-k7-t512-b12" not in {r["variant"] for r in car.plan(100, 7, "di")}
    table = car.compare_di("benchmarks/gpu/h200x2-20261130di-custom-ar.csv")
    assert "\n".join(table) + "\n" == (GPU / "h200x2-20261130di-compare.txt").read_text()
    assert [line.split("|")[-2].strip() for line in table if line.startswith("| N")] == ["yes", "yes", "no", "yes"]


def test_run_dg_tables_are_what_the_script_gives(car: types.ModuleType) -> None:
    """Run dg (four H200s): its rows against the frozen model registered first (M1-M5) and against the
    documents after run di (the addendum's P1-P5) reproduce the committed comparisons, with the checks as
    docs/gpu.md reports them (M2, M3 and P2 fail; P3, run di's form with three peers' loads, passes)."""
    path = "benchmarks/gpu/h200x4-20261130dg-custom-ar.csv"
    before, after = car.compare_dg(path), car.compare_dg_di(path)
    assert "\n".join(before) + "\n" == (GPU / "h200x4-20261130dg-compare.txt").read_text()
    assert "\n".join(after) + "\n" == (GPU / "h200x4-20261130dg-compare-after-di.txt").read_text()
    verdict = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in before + after
               if line.startswith(("| M", "| P"))}
    assert verdict == {"M1": "yes", "M2": "no", "M3": "no", "M4": "yes", "M5": "yes",
                       "P1": "yes", "P2": "no", "P3": "yes", "P4": "yes", "P5": "yes"}
