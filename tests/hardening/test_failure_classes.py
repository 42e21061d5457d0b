"""One test per failure class of issue 11: each bad input exits 2 with a located message, in
under GUARD_S seconds, with no traceback and nothing written (or exits 0 where the input is
actually fine)."""

from __future__ import annotations

import os
import re
import socket
import stat
import threading
from pathlib import Path

import pytest

from rdusim.config import loader
from tests.hardening.conftest import GUARD_S, assert_input_error, files_under, run_cli

PREFILL = "mappings/deepseek-r1/prefill-snapstream.yaml"
DECODE = "mappings/deepseek-r1/decode.yaml"
LLAMA = "mappings/llama-3.1-8b/prefill.yaml"
LLAMA_DECODE = "mappings/llama-3.1-8b/decode.yaml"


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


# ---------------------------------------------------------------- 1. not UTF-8 text
def test_1_not_utf8_is_located_and_validate_reports_every_file(workspace):
    bad = workspace / "m" / "latin1.yaml"
    bad.parent.mkdir()
    bad.write_bytes(b"kind: mapping\nname: caf\xe9\n")
    (workspace / "m" / "binary.yaml").write_bytes(b"\x00\xff\xfe binary")
    (workspace / "m" / "good.yaml").write_text((workspace / "hw_configs" / "sn40l-16.yaml").read_text()
                                               .replace("socket: sn40l.yaml", "socket: ../hw_configs/sn40l.yaml"))
    assert_input_error(run_cli("simulate", bad), f"{bad}:2: not UTF-8 text (byte 0xe9 at offset 23)")
    assert_input_error(run_cli("explore", "--model", "deepseek-r1", "--phase", "prefill", "--mapping", bad),
                       f"{bad}:2: not UTF-8 text")
    result = run_cli("validate", workspace / "m")
    assert_input_error(result, f"{bad}:2: not UTF-8 text", f"{workspace / 'm' / 'binary.yaml'}:1: not UTF-8 text")
    assert f"ok    {workspace / 'm' / 'good.yaml'}" in result.out


# ---------------------------------------------------------------- 2. deep or self-referencing YAML
@pytest.mark.parametrize(("text", "line", "message"), [
    ("kind: mapping\na: &x [*x]\n", 2, "recursive alias"),
    ("kind: mapping\na: " + "[" * 1000 + "]" * 1000 + "\n", 2, "nested more than 64 levels deep"),
    ("kind: mapping\n" + "a: &a [x,x,x,x,x,x,x,x,x]\n"
     + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)),
     None, "more than 100000 values once aliases are expanded"),
])
def test_2_bounded_yaml(workspace, text, line, message):
    path = workspace / "bad.yaml"
    path.write_text(text)
    where = f"{path}:{line}:" if line else f"{path}:"
    assert_input_error(run_cli("simulate", path), where, message)
    assert_input_error(run_cli("validate", path), message)


# ---------------------------------------------------------------- 3. --set values that are not YAML
@pytest.mark.parametrize(("override", "problem"), [
    ("defaults.tp=[1,", "did not find expected node content"),
    ("name=a: b: c", "mapping values are not allowed"),
    ("name=*foo", "undefined alias"),
    ("name=!!python/object/apply:os.system [echo hacked]", "could not determine a constructor"),
    ("workload={seq_len: 1024, seq_len: 2048}", "seq_len: duplicate key"),
])
def test_3_set_value_not_yaml(workspace, override, problem):
    value = override.partition("=")[2]
    assert_input_error(run_cli("simulate", LLAMA, "--set", override),
                       f"--set {override!r}: VALUE is not valid YAML: ", problem)
    assert value  # the message quotes the whole KEY=VALUE as typed


# ---------------------------------------------------------------- 4. output paths, half-written results
@pytest.mark.parametrize(("option", "path", "why"), [
    ("--out", "adir", "is a folder"),
    ("--out", "/proc/rdusim.json", "is under /proc"),
    ("--trace", "/sys/rdusim.json", "is under /sys"),
    ("--out", "afile/x.json", "afile is a file, not a folder"),
    ("--trace", "no/such/dir/t.json", "folder 'no/such/dir' does not exist"),
])
def test_4_output_paths_checked_before_work(workspace, option, path, why):
    (workspace / "adir").mkdir()
    (workspace / "afile").write_text("x")
    before = files_under(workspace)
    other = "--trace" if option == "--out" else "--out"
    result = run_cli("simulate", LLAMA, "--seq-len", "1024", other, "ok.json", option, path)
    assert_input_error(result, f"{option}: {path}: {why}")
    assert files_under(workspace) == before  # ok.json was not written either


def test_4_sweep_and_numerics_write_all_or_nothing(workspace):
    before = files_under(workspace)
    assert_input_error(run_cli("sweep", LLAMA_DECODE, "--batch", "1", "--out", "s.csv", "--plot", "bad/p.png"),
                       "--plot: bad/p.png: folder 'bad' does not exist")
    assert_input_error(run_cli("numerics", "passkey", "--out", "p.csv", "--plot", "bad/p.png"),
                       "--plot: bad/p.png: folder 'bad' does not exist")
    assert files_under(workspace) == before


# ---------------------------------------------------------------- 5. hardware values
@pytest.mark.parametrize(("old", "new", "key", "why"), [
    ('bandwidth: "1.6 TB/s"', 'bandwidth: "0 TB/s"', "memory.hbm.bandwidth", "must be > 0"),
    ('bandwidth: "1.6 TB/s"', 'bandwidth: "-1.6 TB/s"', "memory.hbm.bandwidth", "must be > 0"),
    ('bandwidth: "1.6 TB/s"', 'bandwidth: "1e400 TB/s"', "memory.hbm.bandwidth", "not a finite quantity"),
    ('bandwidth: "250 GB/s"', 'bandwidth: "0 GB/s"', "p2p.bandwidth", "must be > 0"),
    ('peak: "638 TFLOP/s"', 'peak: "0 TFLOP/s"', "compute.peak", "must be > 0"),
    ('clock: "1.2 GHz"', 'clock: "0 GHz"', "compute.clock", "must be > 0"),
    ('latency: "2 us"', 'latency: "-2 us"', "p2p.latency", "must be >= 0"),
    ('hardware: "1 us"', 'hardware: "-1 us"', "kernel_launch.hardware", "must be >= 0"),
    ('capacity: "64 GiB"', 'capacity: "0 GiB"', "memory.hbm.capacity", "must be > 0"),
    (r"gemm: [0-9.]+", "gemm: .nan", "efficiency.gemm", "finite number"),  # whatever calibration wrote
])
def test_5_physical_quantities(workspace, old, new, key, why):
    socket_yaml = workspace / "hw_configs" / "sn40l.yaml"
    text = socket_yaml.read_text()
    assert re.search(old, text), f"{old!r} is not in {socket_yaml}"
    socket_yaml.write_text(re.sub(old, new, text, count=1))
    line = _line_of(socket_yaml, new)
    assert_input_error(run_cli("simulate", LLAMA, "--seq-len", "1024"), f"hw_configs/sn40l.yaml:{line}: {key}: ", why)


def test_5_zero_latency_means_free(workspace):
    socket_yaml = workspace / "hw_configs" / "sn40l.yaml"
    socket_yaml.write_text(socket_yaml.read_text().replace('latency: "2 us"', 'latency: "0 us"'))
    assert run_cli("validate", socket_yaml).code == 0


# ---------------------------------------------------------------- 6. sizes that would never finish
@pytest.mark.parametrize(("argv", "fragments"), [
    (["simulate", LLAMA, "--seq-len", str(2**40)],
     ["(--seq-len 1099511627776): workload.seq_len: 1099511627776 tokens exceed llama-3.1-8b's context of 131072"]),
    (["simulate", LLAMA, "--seq-len", str(2**20)], ["exceed llama-3.1-8b's context of 131072 tokens"]),
    (["simulate", LLAMA_DECODE, "--batch", "1000000000"],
     ["(--batch 1000000000): workload.batch: does not fit:", "of HBM of all 8 sockets", "--ignore-capacity"]),
    (["simulate", LLAMA_DECODE, "--batch", "1000000000", "--ignore-capacity"],
     ["layers.dense[0]: kernel ", "would be simulated as about", "a layer may have at most"]),
    (["simulate", LLAMA, "--set", "defaults.kv_block_tokens=1", "--set", "defaults.chunk_tokens=1"],
     ["kernel 'MHA' would be simulated as about", "kv_block_tokens"]),
    (["explore", "--model", "llama-3.1-8b", "--phase", "prefill", "--seq-len", str(2**40)],
     ["(--seq-len 1099511627776): workload.seq_len:", "context"]),
    (["explore", "--model", "llama-3.1-8b", "--phase", "decode", "--budget", str(10**12)],
     ["argument --budget: 1000000000000 is more than 1000000"]),
    (["calibrate", "--phase", "prefill", "--dry-run", "--predict", str(2**40)],
     ["(--predict 1099511627776): workload.seq_len:", "context of 163840"]),
])
def test_6_absurd_sizes_fail_at_once(workspace, argv, fragments):
    assert_input_error(run_cli(*argv), *fragments)


def test_6_huge_node_and_huge_sweep_batch(workspace):
    node = workspace / "hw_configs" / "sn40l-8.yaml"
    node.write_text(node.read_text().replace("sockets: 8", "sockets: 1000000000"))
    assert_input_error(run_cli("simulate", LLAMA), f"sn40l-8.yaml:{_line_of(node, 'sockets: 1000000000')}: sockets: ",
                       "less than or equal to 1024")
    node.write_text(node.read_text().replace("sockets: 1000000000", "sockets: 8"))
    result = run_cli("sweep", LLAMA_DECODE, "--seq-len", "8192", "--batch", "1000000000", "--workers", "1")
    assert result.code == 0 and result.seconds < GUARD_S, result.err
    assert "False" in result.out and "KV cache for a single layer" in result.out


# ---------------------------------------------------------------- 7. Dask addresses
def _garbage_server() -> tuple[str, threading.Event]:
    """A TCP peer that answers every connection with bytes that are not Dask's protocol."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"\xff" * 64 + b"HTTP/1.1 200 OK\r\n\r\nnot a scheduler")
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{server.getsockname()[1]}", stop


def test_7_dask_addresses(workspace):
    assert_input_error(run_cli("explore", "--model", "llama-3.1-8b", "--phase", "decode", "--dask", "not-an-address"),
                       "--dask: cannot reach the Dask scheduler at 'not-an-address'")
    address, stop = _garbage_server()
    try:
        result = run_cli("explore", "--model", "llama-3.1-8b", "--phase", "decode", "--dask", address)
    finally:
        stop.set()
    assert "Traceback" not in result.err and result.code == 2, result.err
    assert f"--dask: cannot reach the Dask scheduler at {address!r}" in result.err
    assert result.seconds < 5.0 + GUARD_S  # the connect timeout, then the message


# ---------------------------------------------------------------- 8. documents of the wrong shape
def test_8_wrong_shapes_and_unreadable_files(workspace, monkeypatch):
    for kind in ("[a, b]", "{a: 1}"):
        doc = workspace / "k.yaml"
        doc.write_text(f"name: x\nkind: {kind}\n")
        assert_input_error(run_cli("validate", doc), f"{doc}:2: kind: expected one of socket, node, model, mapping")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(loader, "open", refuse, raising=False)  # as root, chmod 0 would not stop a read
    assert_input_error(run_cli("simulate", LLAMA), f"{LLAMA}: cannot read (Permission denied)")


@pytest.mark.parametrize(("argv", "fragments"), [
    (["calibrate", "--predict", "abc"], ["--predict: expected comma-separated positive integers, got 'abc'"]),
    (["calibrate", "--predict", ""], ["--predict: expected comma-separated positive integers, got ''"]),
    (["calibrate", "--predict", "0"], ["--predict: expected comma-separated positive integers, got '0'"]),
    (["calibrate", "--phase", "prefill", "--dry-run", "--mapping", LLAMA],
     ["the prefill calibration fits the published shares of the MoE layer's kernels QKV, MHA",
      "missing: QKV, MHA"]),
    (["calibrate", "--phase", "prefill", "--dry-run", "--mapping", DECODE],
     [f"--mapping {DECODE}: is a decode mapping; the prefill calibration needs a prefill mapping"]),
])
def test_8_calibrate_options_before_fitting(workspace, argv, fragments):
    assert_input_error(run_cli(*argv), *fragments)


# ---------------------------------------------------------------- 9. invalid content accepted before
@pytest.mark.parametrize(("mapping", "overrides", "fragments"), [
    (LLAMA, ["layers.dense.0.shard={attn_norm: {seq: -8}}"], ["layers.dense[0].shard.attn_norm.seq: Input should be greater than 0"]),
    (LLAMA, ["layers.dense.0.shard={nosuchop: {seq: 2}}"], ["layers.dense[0].shard.nosuchop: shards op 'nosuchop', which is not in kernel"]),
    (DECODE, ["prefill=decode.yaml"], ["prefill: names this mapping itself"]),
    (DECODE, ["prefill=decode-snapstream.yaml"], ["prefill: 'decode-snapstream.yaml' is a decode mapping; expected a prefill mapping"]),
    (DECODE, ["prefill=../llama-3.1-8b/prefill.yaml"], ["maps llama-3.1-8b, this mapping maps deepseek-r1"]),
    (DECODE, ["prefill=nope.yaml"], ["prefill: 'nope.yaml' is not a valid mapping:", "nope.yaml: file not found"]),
    (PREFILL, ["prefill=prefill.yaml"], ["prefill: only a decode mapping names the prefill mapping"]),
    (LLAMA, ["layers.dense.1.kernel=QKV"], ["layers.dense[1].kernel: kernel name 'QKV' is already used by layers.dense[0]"]),
    (DECODE, ["workload.accepted_tokens_per_step=.inf"], ["workload.accepted_tokens_per_step: Input should be a finite number"]),
    (DECODE, ["kv_policy.compression=.inf"], ["kv_policy.compression: Input should be a finite number"]),
    (DECODE, ["workload.batch=true"], ["workload.batch: Input should be a valid integer (got True)"]),
    (DECODE, ["workload.seq_len=true"], ["workload.seq_len: Input should be a valid integer (got True)"]),
    (LLAMA, ["kv_policy={name: kascade, anchors: 1000}"], ["kv_policy.anchors: 1000 anchor layers but llama-3.1-8b has 32 layers"]),
    (LLAMA, ["name=''"], ["name: must not be empty"]),
    (LLAMA, ["layers.dense.0.kernel='  '"], ["layers.dense[0].kernel: must not be empty"]),
    (LLAMA, ["workload.routing=sampled", "workload.seed=-1"], ["workload.seed: Input should be greater than or equal to 0"]),
])
def test_9_invalid_content_rejected(workspace, mapping, overrides, fragments):
    argv = ["simulate", mapping] + ([] if "seq_len" in overrides[0] else ["--seq-len", "1024"])
    for override in overrides:
        argv += ["--set", override]
    result = run_cli(*argv)
    assert_input_error(result, *fragments)
    assert f"{mapping} (--set " in result.err or f"{mapping}:" in result.err


def test_9_negative_launch_cost_on_a_prefill(workspace):
    socket_yaml = workspace / "hw_configs" / "sn40l.yaml"
    text = socket_yaml.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("software:"))
    socket_yaml.write_text(text.replace(old, '  software: "-357.4 us"'))
    assert_input_error(run_cli("simulate", LLAMA, "--seq-len", "1024"),
                       f"hw_configs/sn40l.yaml:{_line_of(socket_yaml, '-357.4 us')}: kernel_launch.software: must be >= 0")


@pytest.mark.parametrize(("argv", "fragments"), [
    (["sweep", LLAMA_DECODE, "--policy", ""], ["--policy: expected comma-separated KV policies, got ''"]),
    (["sweep", LLAMA_DECODE, "--workers", "0"], ["argument --workers: expected a positive integer, got '0'"]),
    (["sweep", LLAMA_DECODE, "--workers", "-2"], ["argument --workers: expected a positive integer, got '-2'"]),
    (["sweep", LLAMA_DECODE, "--compression", "inf"], ["argument --compression: expected a finite number"]),
    (["explore", "--model", "llama-3.1-8b", "--phase", "decode", "--workers", "0"], ["argument --workers"]),
    (["explore", "--model", "llama-3.1-8b", "--phase", "decode", "--slo-tpot-ms", "nan"],
     ["argument --slo-tpot-ms: expected a finite number, got 'nan'"]),
    (["explore", "--model", "llama-3.1-8b", "--phase", "decode", "--mapping", LLAMA],
     [f"--mapping {LLAMA}: is a prefill mapping but --phase is decode"]),
    (["calibrate", "--max-evaluations", "0"], ["argument --max-evaluations: expected a positive integer"]),
    (["calibrate", "--max-evaluations", "-1"], ["argument --max-evaluations: expected a positive integer"]),
    (["numerics", "divergence", "--prompt-file", "x.txt", "--prompt-tokens", "0"],
     ["argument --prompt-tokens: expected a positive integer, got '0'"]),
])
def test_9_options_rejected_before_work(workspace, argv, fragments):
    assert_input_error(run_cli(*argv), *fragments)


def test_9_sweep_of_a_prefill_reports_prefill_columns(workspace):
    result = run_cli("sweep", LLAMA, "--seq-len", "1024", "--batch", "1", "--workers", "1", "--out", "s.csv")
    assert result.code == 0, result.err
    import pandas as pd  # noqa: PLC0415

    row = pd.read_csv(workspace / "s.csv").iloc[0]
    assert row["fits"] and row["ttft_s"] > 0 and row["step_s"] == row["ttft_s"]
    assert row["tokens_per_s"] == pytest.approx(1024 / row["ttft_s"])  # prompt tokens per second
    assert pd.isna(row["tpot_s"])


# ---------------------------------------------------------------- 10. messages locate the problem
def test_10_messages_locate_the_problem(workspace):
    assert_input_error(run_cli("simulate", LLAMA, "--set", "model=llama-9000"),
                       f"{LLAMA} (--set 'model=llama-9000'): model: unknown model 'llama-9000'")
    decode = workspace / DECODE
    decode.write_text(decode.read_text().replace("prefill: prefill.yaml", "prefill: gone.yaml"))
    assert_input_error(run_cli("simulate", decode),
                       f"{decode}:{_line_of(decode, 'prefill: gone.yaml')}: prefill: 'gone.yaml' is not a valid mapping")
    assert_input_error(run_cli("numerics", "passkey", "--seed", "-1"), "argument --seed: expected an integer >= 0")
    nul = workspace / "nul.yaml"
    nul.write_text("kind: mapping\nname: a\x00b\n")
    assert_input_error(run_cli("validate", nul), f"{nul}:2: YAML syntax error: character '\\x00' is not allowed")
    for key in ("1", "~", "yes"):
        doc = workspace / "key.yaml"
        doc.write_text(f"kind: node\nname: n\n{key}: 3\n")
        assert_input_error(run_cli("validate", doc), f"{doc}:3: <top>: key {key!r} is not a name")
    assert_input_error(run_cli("simulate", LLAMA, "--seq-len", "-1"), f"{LLAMA} (--seq-len -1): workload.seq_len:")
    assert_input_error(run_cli("simulate", LLAMA_DECODE, "--batch", "0"), f"{LLAMA_DECODE} (--batch 0): workload.batch:")
    assert_input_error(run_cli("simulate", LLAMA, "--hw", "nope.yaml"), "(--hw nope.yaml): hardware: ", "file not found")
    (workspace / "adir").mkdir()
    os.mkfifo(workspace / "fifo")
    assert_input_error(run_cli("simulate", "adir"), "adir: is a folder, not a file")
    assert_input_error(run_cli("simulate", "fifo"), "fifo: is not a regular file (a FIFO)")
    assert_input_error(run_cli("simulate", "/dev/null"), "/dev/null: is not a regular file (a character device)")
    assert_input_error(run_cli("calibrate", "--predict", "0"), "--predict: expected comma-separated positive integers")


# ---------------------------------------------------------------- 11. how outputs are written
def test_11_outputs_follow_the_umask_and_refuse_special_files(workspace):
    previous = os.umask(0o022)
    try:
        assert run_cli("simulate", LLAMA, "--seq-len", "1024", "--out", "r.txt").code == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE((workspace / "r.txt").stat().st_mode) == 0o644
    (workspace / "link.txt").symlink_to(workspace / "r.txt")
    os.mkfifo(workspace / "pipe")
    (workspace / "ro.txt").write_text("keep")
    (workspace / "ro.txt").chmod(0o444)
    for name, why in (("link.txt", "is a symbolic link"), ("pipe", "exists and is not a regular file"),
                      ("ro.txt", "is read-only")):
        assert_input_error(run_cli("simulate", LLAMA, "--seq-len", "1024", "--out", name), f"--out: {name}: {why}")
    assert (workspace / "link.txt").is_symlink() and (workspace / "ro.txt").read_text() == "keep"
    assert stat.S_ISFIFO((workspace / "pipe").lstat().st_mode)


def test_11_an_output_folder_replaces_stale_files(workspace):
    from rdusim.cli.output import Outputs  # noqa: PLC0415

    folder = workspace / "out"
    folder.mkdir()
    for name in ("top-01.yaml", "top-02.yaml", "top-03.yaml", "notes.txt"):
        (folder / name).write_text("old")
    outputs = Outputs()
    out = outputs.folder("--out", folder, stale="top-*.yaml")
    outputs.put(out / "top-01.yaml", "new")
    outputs.put(out / "ranking.csv", "a\n")
    outputs.commit()
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "ranking.csv", "top-01.yaml"]
    assert (folder / "top-01.yaml").read_text() == "new"


def test_11_explore_out_is_checked_before_the_search(workspace):
    (workspace / "afile").write_text("x")
    assert_input_error(run_cli("explore", "--model", "llama-3.1-8b", "--phase", "decode", "--out", "afile"),
                       "--out: afile: exists and is not a folder")


# ---------------------------------------------------------------- a bug is not the user's fault
def test_internal_error_is_one_line_exit_1(workspace, monkeypatch):
    from rdusim.cli import validate  # noqa: PLC0415

    def broken(args):
        raise KeyError("oops")

    monkeypatch.setattr(validate, "run", broken)
    result = run_cli("validate", LLAMA)
    assert result.code == 1 and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert "internal error (a bug in rdusim" in result.err and "issue tracker" in result.err
    assert "--debug" in result.err
    with pytest.raises(KeyError):
        run_cli("--debug", "validate", LLAMA)
