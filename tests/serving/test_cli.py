"""``rdusim serve`` / ``serve-sweep`` end to end on a small deployment; bad inputs exit 2, located."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rdusim.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "serving"
SMALL = str(DATA / "llama-small.yaml")
WORKLOAD = ["--prompt-tokens", "lognormal:1024,0.4", "--output-tokens", "uniform:2,64", "--duration", "60"]


def test_serve_writes_every_output_and_repeats_bit_for_bit(tmp_path: Path, capsys) -> None:
    outputs = []
    for name in ("a", "b"):
        assert main(["serve", SMALL, "--rate", "2", *WORKLOAD, "--seed", "3", "--out", str(tmp_path / name)]) == 0
        outputs.append({p.name: p.read_bytes() for p in (tmp_path / name).iterdir()})
    assert set(outputs[0]) == {"requests.csv", "summary.json", "nodes.csv", "batch_histogram.csv", "trace.json",
                               "latency_cdf.png"}
    for name in ("requests.csv", "summary.json", "nodes.csv", "trace.json"):
        assert outputs[0][name] == outputs[1][name]
    frame = pd.read_csv(tmp_path / "a" / "requests.csv")
    summary = json.loads(outputs[0]["summary.json"])
    assert summary["completed"] == (frame["status"] == "done").sum() == len(frame) - summary["rejected"]
    done = frame[frame["status"] == "done"]
    assert (done["ttft_s"] >= done["queue_s"]).all() and (done["e2e_s"] >= done["ttft_s"]).all()
    assert frame.loc[frame["status"] == "rejected", "reason"].str.contains("exceeds max_context").all()
    assert set(frame["decode_node"].dropna()) == {"decode0"}
    assert "TTFT" in capsys.readouterr().out


def test_serve_streams_the_outputs_of_the_run_in_memory(tmp_path: Path) -> None:
    """``serve --out`` measures the run as it goes (requests.csv written as requests finish): the
    same requests.csv, summary, histogram and trace bytes as the run kept in memory (rejected
    rows and NaNs included)."""
    from rdusim.analysis.serving.deployment import load_deployment
    from rdusim.analysis.serving.perfetto import serving_trace
    from rdusim.analysis.serving.run import run_serving
    from rdusim.analysis.serving.workload import generate_workload, parse_distribution

    workload = generate_workload(2.0, parse_distribution("lognormal:1024,0.6", "p"),
                                 parse_distribution("uniform:1,64", "o"), seed=3, requests=300)
    whole = run_serving(load_deployment(SMALL), workload, record_events=False)
    frame = whole.requests
    assert (frame["status"] == "rejected").any() and frame["transfer_s"].isna().any()
    out = tmp_path / "run"
    assert main(["serve", SMALL, "--rate", "2", "--prompt-tokens", "lognormal:1024,0.6", "--output-tokens",
                 "uniform:1,64", "--seed", "3", "--requests", "300", "--out", str(out)]) == 0
    assert (out / "requests.csv").read_text(encoding="utf-8") == frame.to_csv(index=False)
    assert (out / "summary.json").read_text(encoding="utf-8") == json.dumps(whole.summary, indent=2) + "\n"
    assert (out / "batch_histogram.csv").read_text(encoding="utf-8") == whole.batch_histogram.to_csv(index=False)
    assert (out / "trace.json").read_text(encoding="utf-8") == json.dumps(serving_trace(whole))
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["run", *(p.name for p in out.iterdir())])


def test_serve_interrupted_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    """requests.csv is streamed into a hidden file while the run goes; a failure mid-run removes
    it and creates no folder."""
    import rdusim.cli.serve as serve

    def failing(*args, requests_csv, **kwargs):
        requests_csv.write("request,arrival_s\n0,0.0\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(serve, "run_serving", failing)
    assert main(["serve", SMALL, "--rate", "2", *WORKLOAD, "--out", str(tmp_path / "run")]) == 130
    assert list(tmp_path.iterdir()) == []


def test_serve_replays_the_shipped_trace(capsys) -> None:
    assert main(["serve", SMALL, "--trace", str(DATA / "requests.csv"), "--time-scale", "0.5"]) == 0
    assert "requests 40: completed 40" in capsys.readouterr().out


def test_serve_sweep_reports_sustained_rates(tmp_path: Path, capsys) -> None:
    code = main(["serve-sweep", f"{SMALL},{SMALL}", "--rate", "1,4", *WORKLOAD, "--workers", "1",
                 "--out", str(tmp_path / "plan"), "--plot", str(tmp_path / "plan.png")])
    assert code == 0
    sweep = pd.read_csv(tmp_path / "plan" / "sweep.csv")
    assert list(sweep["rate"]) == [1, 4, 1, 4]
    assert sweep.iloc[0].drop("rate").equals(sweep.iloc[2].drop("rate"))   # same deployment, same rows
    assert (tmp_path / "plan.png").stat().st_size > 0
    assert "highest rate sustained" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--rate", "0"], "--rate: expected a positive number"),
    (["--rate", "-1"], "--rate: expected a positive number"),
    (["--rate", "1", "--slo-ttft-s", "0", "--slo-tpot-ms", "50"], "--slo-ttft-s: an SLO must be a positive"),
    (["--rate", "1", "--slo-ttft-s", "2", "--slo-tpot-ms", "-5"], "--slo-tpot-ms: an SLO must be a positive"),
    (["--rate", "1", "--prompt-tokens", "lognormal:5"], "--prompt-tokens: lognormal takes 2"),
    (["--trace", str(DATA / "missing.csv")], "not found"),
])
def test_bad_options_exit_2_before_writing(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    out = tmp_path / "run"
    assert main(["serve", SMALL, *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_bad_trace_row_is_located_and_nothing_written(tmp_path: Path, capsys) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n1,100,five\n")
    out = tmp_path / "run"
    assert main(["serve", SMALL, "--trace", str(trace), "--out", str(out)]) == 2
    assert f"{trace}:3:3: output_tokens" in capsys.readouterr().err
    assert not out.exists()


def test_bad_serving_yaml_is_located(tmp_path: Path, capsys) -> None:
    text = (DATA / "llama-small.yaml").read_text().replace("  nodes: 2\n", "  nodse: 2\n")
    text = text.replace("../../../mappings", str(Path(__file__).resolve().parents[2] / "mappings"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["serve", str(bad), "--rate", "1", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:7: prefill.nodse: unknown key 'nodse'; did you mean 'nodes'?" in err
    assert not (tmp_path / "run").exists()
    assert main(["serve-sweep", SMALL, "--rate", "1,0"]) == 2
    assert "--rate: every rate must be a positive" in capsys.readouterr().err


def test_schema_of_the_serving_kind(capsys) -> None:
    assert main(["schema", "serving"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"prefill", "decode", "interconnect", "layout", "scheduling"} <= set(schema["properties"])


def test_sweep_same_rows_in_process_on_a_pool_and_on_dask() -> None:
    import distributed

    from rdusim.analysis.execution import DaskExecutor, LocalExecutor
    from rdusim.analysis.serving.deployment import load_deployment
    from rdusim.analysis.serving.metrics import Slo
    from rdusim.analysis.serving.sweep import serve_sweep
    from rdusim.analysis.serving.workload import GeneratedWorkload, parse_distribution

    deployment = load_deployment(SMALL)
    workload = GeneratedWorkload(parse_distribution("lognormal:1024,0.4", "p"), parse_distribution("uniform:2,64", "o"),
                            duration_s=30.0, seed=5)
    slo = Slo(2.0, 0.05)
    inline = serve_sweep([deployment], [1.0, 3.0], workload, slo)
    pool = LocalExecutor(2)
    try:
        local = serve_sweep([deployment], [1.0, 3.0], workload, slo, pool)
    finally:
        pool.close()
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        dask = DaskExecutor(cluster.scheduler_address)
        try:
            remote = serve_sweep([deployment], [1.0, 3.0], workload, slo, dask)
        finally:
            dask.close()
    pd.testing.assert_frame_equal(inline, local)
    pd.testing.assert_frame_equal(inline, remote)


def test_loading_a_deployment_counts_its_step_table_simulations() -> None:
    """``progress(done, total)`` once per step-table simulation, the CLI's bar while loading."""
    from rdusim.analysis.serving.deployment import load_deployment

    calls: list[tuple[int, int]] = []
    deployment = load_deployment(SMALL, progress=lambda done, total: calls.append((done, total)))
    prefill, decode = deployment.prefill_table, deployment.decode_table
    total = len(prefill.tokens) + len(decode.buckets) * len(decode.kv_tokens)  # 2 + 2 x 2 in llama-small.yaml
    assert total == 6
    assert calls == [(done, total) for done in range(1, total + 1)]


@pytest.mark.parametrize(("slo", "message"), [
    (["--slo-ttft-s", "0.001", "--slo-tpot-ms", "50"], "--slo-ttft-s 0.001: impossible on llama-small: the shortest"),
    (["--slo-ttft-s", "2", "--slo-tpot-ms", "0.01"], "--slo-tpot-ms 0.01: impossible on llama-small: one decode step"),
])
def test_impossible_slos_exit_2(tmp_path: Path, capsys, slo: list[str], message: str) -> None:
    out = tmp_path / "run"
    assert main(["serve", SMALL, "--rate", "1", *WORKLOAD, *slo, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
    assert main(["serve-sweep", SMALL, "--rate", "1", *WORKLOAD, *slo, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_serving_commands_import_no_heavy_module() -> None:
    import subprocess
    import sys

    code = ("import sys, rdusim.cli.serve, rdusim.cli.serve_sweep; "
            "print(sorted(m for m in ('matplotlib', 'dask', 'distributed', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
