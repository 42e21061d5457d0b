"""The output contract of ``rdusim simulate`` (scripts outside this repo read it) and validate."""

from __future__ import annotations

import csv
import json

from rdusim.cli import main
from tests.conftest import ROOT, SNAPSTREAM

KERNEL_KEYS = {"kernel", "layer_type", "calls", "latency_s", "share", "compute_s", "memory_s", "comm_s", "bound"}
KERNEL_NAMES = {"QKV", "MHA", "Output Proj", "Router", "MoE FFN", "SnapKV Compression", "Streaming Ring Buffer"}


def test_json_contract(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["simulate", str(SNAPSTREAM), "--seq-len", "8192", "--format", "json", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["phase"] == "prefill" and data["total_s"] > 0
    assert all(KERNEL_KEYS <= row.keys() for row in data["kernels"])
    assert KERNEL_NAMES <= {row["kernel"] for row in data["kernels"]}
    assert {row["layer_type"] for row in data["kernels"]} == {"dense", "moe"}
    for layer_type in ("dense", "moe"):
        shares = [r["share"] for r in data["kernels"] if r["layer_type"] == layer_type]
        assert abs(sum(shares) - 1) < 1e-9
    assert abs(sum(r["latency_s"] for r in data["kernels"]) - data["total_s"]) < 1e-12
    hbm = data["memory"]["per_socket"]["hbm"]
    assert hbm["weights"] > 0 and hbm["kv_cache"] > 0 and hbm["activations"] > 0


def test_csv_and_trace(tmp_path, capsys):
    out, trace = tmp_path / "r.csv", tmp_path / "r.trace.json"
    assert main(["simulate", str(SNAPSTREAM), "--seq-len", "8192", "--format", "csv", "--out", str(out),
                 "--trace", str(trace)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert KERNEL_KEYS <= rows[0].keys() and len(rows) == 12
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"kernels", "hbm", "p2p", "compute:attention"} <= tracks
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")


def test_table_names_the_totals(capsys):
    assert main(["simulate", str(SNAPSTREAM), "--seq-len", "8192"]) == 0
    text = capsys.readouterr().out
    assert "time to first token:" in text and "HBM" in text and "SnapKV Compression" in text


def test_every_shipped_yaml_validates(capsys):
    assert main(["validate", str(ROOT / "mappings"), str(ROOT / "hw_configs"),
                 str(ROOT / "rdusim" / "config" / "models")]) == 0
    assert "file(s) valid" in capsys.readouterr().out


def test_schema(capsys):
    assert main(["schema", "mapping"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "MappingSpec"


def test_simulate_never_imports_torch(tmp_path):
    """`rdusim simulate` loads only its own subcommand: no torch, no kernels (issue 9)."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    script = (
        "import sys, rdusim.cli\n"
        "assert 'torch' not in sys.modules\n"
        "try:\n    rdusim.cli.main(['simulate', '--help'])\nexcept SystemExit:\n    pass\n"
        f"assert rdusim.cli.main(['simulate', {str(ROOT / 'mappings/llama-3.1-8b/prefill.yaml')!r},"
        " '--seq-len', '1024', '--out', " + repr(str(tmp_path / "r.txt")) + "]) == 0\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'rdusim.kernels'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "r.txt").read_text().startswith("llama")
