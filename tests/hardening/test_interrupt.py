"""Ctrl-C and SIGTERM half-way through long work: one line, exit 130 or 143, and every output
path exactly as it was (names, bytes, modification times). The test sends the signal itself,
to a real ``rdusim`` process, once its progress bar (drawn on a pseudo-terminal) shows that
the work has started: the middle of the run, whatever the machine's speed."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.hardening.conftest import ROOT

#: the progress line that says the work is under way (a bar past zero)
STARTED = re.compile(r"(serve|estimate|simulate|rescore|search)\w*: +\d+%\|[^|]*\| *[1-9]\d*/\d+")
#: a run that never shows progress within this time has failed the test (not a timing assert:
#: only a bound on how long the test waits)
WAIT_S = 300.0


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _interrupt(argv: list[str], cwd: Path, sig: int | None) -> tuple[int, str, str]:
    """Run ``rdusim ARGV`` with standard error on a terminal; send ``sig`` once a progress bar
    has moved (``None``: run to the end); the exit code, what the bar showed when the signal
    went, and standard error."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", "import sys; from rdusim.cli import main; sys.exit(main())",
                                *argv], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
                               env=env)
    os.close(slave)
    seen, shown, started = "", "", time.monotonic()
    try:
        while process.poll() is None and time.monotonic() - started < WAIT_S:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                continue
            try:
                seen += os.read(master, 65536).decode(errors="replace")
            except OSError:
                break
            match = STARTED.search(seen.replace("\r", "\n"))
            if match and not shown and sig is not None:
                shown = match.group(0)
                process.send_signal(sig)
                break
        code = process.wait(timeout=WAIT_S)
        while True:  # the rest of standard error
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return code, shown, seen.replace("\r", "\n")


def _last_line(stderr: str) -> str:
    return [line for line in stderr.split("\n") if line.strip()][-1].strip()


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    """An output folder from an earlier run (what an interrupted run must leave as it was)
    beside copies of the shipped documents."""
    shutil.copytree(ROOT / "mappings", tmp_path / "mappings")
    shutil.copytree(ROOT / "hw_configs", tmp_path / "hw_configs")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("summary.json", "requests.csv", "top-01.yaml", "top-02.yaml"):
        (out / name).write_text(f"an earlier run's {name}\n")
    (tmp_path / "earlier.csv").write_text("an earlier sweep\n")
    return tmp_path


@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGTERM, 143, "rdusim serve: terminated (SIGTERM)"),
                                                   (signal.SIGINT, 130, "rdusim serve: interrupted (Ctrl-C)")])
def test_serve_with_a_large_trace_interrupted(outputs, sig, code, line):
    trace = outputs / "large.csv"
    with trace.open("w") as handle:  # 400,000 short requests: minutes of the request engine
        handle.write("arrival_s,prompt_tokens,output_tokens\n")
        handle.writelines(f"{i * 0.01:.2f},{1000 + i % 3000},{1 + i % 7}\n" for i in range(400_000))
    before = _snapshot(outputs)
    result, shown, stderr = _interrupt(["serve", str(ROOT / "mappings/deepseek-r1/serve.yaml"), "--trace", str(trace),
                                        "--slo-ttft-s", "100", "--slo-tpot-ms", "1000", "--out", "out"], outputs, sig)
    assert shown, f"no progress shown before the run ended\n{stderr[-2000:]}"
    assert result == code, stderr[-2000:]
    assert _last_line(stderr) == line
    assert "Traceback" not in stderr
    assert _snapshot(outputs) == before


@pytest.mark.parametrize("workers", ["1", "2"])
def test_explore_interrupted_half_way(outputs, workers):
    before = _snapshot(outputs)
    # 40,000 candidates: seconds of estimating (4,000 now finish within tqdm's first refresh)
    result, shown, stderr = _interrupt(["explore", "--model", "deepseek-r1", "--phase", "decode", "--budget", "40000",
                                        "--top", "3", "--workers", workers, "--out", "out"], outputs, signal.SIGINT)
    assert shown, f"no progress shown before the run ended\n{stderr[-2000:]}"
    assert result == 130, stderr[-2000:]
    assert _last_line(stderr) == "rdusim explore: interrupted (Ctrl-C)"
    assert "Traceback" not in stderr
    assert _snapshot(outputs) == before


@pytest.mark.parametrize("command", ["serve", "serve-sweep"])
def test_loading_a_deployment_shows_its_step_tables(outputs, command):
    """Building the step tables is seconds of kernel simulations (3-6 s for the shipped
    deployments on the 2-core machine): a bar counts them, 11 prefill + 2 x 8 decode for serve.yaml."""
    code, _, stderr = _interrupt([command, str(ROOT / "mappings/deepseek-r1/serve.yaml"), "--rate", "1", "--requests",
                                  "4", "--slo-ttft-s", "100", "--slo-tpot-ms", "1000"], outputs, None)
    assert code == 0, stderr[-2000:]
    assert re.search(r"step tables: +\d+%\|[^|]*\| *\d+/27 ", stderr), stderr[-2000:]


def test_quiet_and_pipes_show_no_progress(outputs):
    """--quiet (or standard error that is not a terminal): nothing but the result."""
    trace = outputs / "small.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i},1000,4\n" for i in range(50)))
    argv = [sys.executable, "-c", "import sys; from rdusim.cli import main; sys.exit(main())", "serve",
            str(ROOT / "mappings/deepseek-r1/serve.yaml"), "--trace", str(trace), "--slo-ttft-s", "100",
            "--slo-tpot-ms", "1000"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    piped = subprocess.run(argv, cwd=outputs, capture_output=True, text=True, env=env, timeout=WAIT_S)
    assert piped.returncode == 0 and piped.stderr == ""
    master, slave = os.openpty()
    try:
        quiet = subprocess.run([*argv, "--quiet"], cwd=outputs, stdout=subprocess.PIPE, stderr=slave, env=env,
                               timeout=WAIT_S)
        ready, _, _ = select.select([master], [], [], 0.5)  # the terminal is still open: readable = written to
        assert quiet.returncode == 0 and not ready
    finally:
        os.close(slave)
        os.close(master)
