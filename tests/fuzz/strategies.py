"""Hypothesis strategies for the fuzzing suite: mutated shipped YAML documents and CLI
argument vectors, plus the contract every run must keep.

A document mutation is drawn as data (which document, which key path, which edit), applied
to the parsed document and written back as YAML text, or applied to the bytes (corruption,
duplicated lines, anchors and aliases, deep nesting), so both the loader and the schema see
hostile input. The contract (``check_contract``): exit 0 with finite numbers, or exit 2 with
every message line naming a file (and, for a YAML document, its line) or an option; never a
traceback; a failure within ``GUARD_S`` seconds; no file left behind on failure.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.hardening.conftest import GUARD_S, ROOT, Run


def kind_of(path: Path) -> str:
    found = re.search(r"^kind: (\w+)", path.read_text(), re.MULTILINE)
    return found.group(1) if found else ""


#: documents the fuzzer starts from, relative to the workspace: mappings, serving files, GPU
#: mappings, nodes, sockets, GPUs, GPU nodes and models
DOCUMENTS = sorted(
    [str(p.relative_to(ROOT)) for p in (ROOT / "mappings").rglob("*.yaml")]
    + [str(p.relative_to(ROOT)) for p in (ROOT / "hw_configs").glob("*.yaml")]
) + [f"models/{p.name}" for p in sorted((ROOT / "rdusim" / "config" / "models").glob("*.yaml"))]

#: a valid run may legitimately take a while (DeepSeek prefill at 128K); longer is a hang
SUCCESS_LIMIT_S = 60.0

EXTREMES = [0, -1, 1, 2**31, 2**63, -(2**63), 10**400 // 10**300, 1e308, -1e308, 1e-320, float("nan"),
            float("inf"), float("-inf"), True, False, None, "", " ", "x", "0 B", "-1 TB/s", "0 GHz", "1e400 TB/s",
            "nan GiB", "2 us", "64 GiB", "\u00e9\u00e8", "\x07", [], [1, 2], {}, {"a": 1}, "*", "~", "1:2", "a: b"]

VALUES = st.sampled_from(EXTREMES) | st.integers() | st.floats() | st.text(max_size=12)


def _paths(data: Any, at: tuple = ()) -> list[tuple]:
    """Every key or item path in a document (the root excluded)."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            found.append(at + (key,))
            found += _paths(value, at + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found.append(at + (index,))
            found += _paths(value, at + (index,))
    return found


def _parent(data: Any, path: tuple) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


def _edit(data: Any, kind: str, path: tuple, value: Any, depth: int) -> None:
    parent, last = _parent(data, path), path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "retype":
        parent[last] = value
    elif kind == "rename" and isinstance(parent, dict):
        parent[f"{last}x" if isinstance(last, str) else f"k{last}"] = parent.pop(last)
    elif kind == "nest":
        nested = parent[last]
        for _ in range(depth):
            nested = [nested]
        parent[last] = nested
    elif kind == "listify":
        parent[last] = [parent[last], value]


@st.composite
def mutated_documents(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(document path, new bytes, a description of the edit)."""
    name = draw(st.sampled_from(DOCUMENTS))
    source = _source(name)
    text = source.read_text()
    data = yaml.safe_load(text)
    kind = draw(st.sampled_from(["delete", "retype", "rename", "nest", "listify", "bytes", "duplicate",
                                 "alias", "deep", "retype", "retype"]))
    if kind in ("delete", "retype", "rename", "nest", "listify"):
        paths = _paths(data)
        path = paths[draw(st.integers(0, len(paths) - 1))]
        value = draw(VALUES)
        depth = draw(st.integers(1, 80))
        _edit(data, kind, path, value, depth)
        try:
            new = yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8", "surrogatepass")
        except (yaml.YAMLError, ValueError):
            new = text.encode()
        return name, new, f"{kind} {path} -> {value!r}"[:200]
    raw = bytearray(text.encode())
    if kind == "bytes":
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(raw) - 1))
            raw[at] = draw(st.integers(0, 255))
        return name, bytes(raw), "corrupt bytes"
    lines = text.splitlines(keepends=True)
    at = draw(st.integers(0, len(lines) - 1))
    if kind == "duplicate":
        lines.insert(at, lines[at])
        return name, "".join(lines).encode(), f"duplicate line {at + 1}"
    if kind == "alias":
        bomb = "".join(f"l{i}: &l{i} [{', '.join(['*l' + str(i - 1)] * 9)}]\n" for i in range(1, draw(st.integers(1, 9))))
        lines.insert(0, "l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + bomb + draw(st.sampled_from(["", "r: &r [*r]\n"])))
        return name, "".join(lines).encode(), "aliases"
    depth = draw(st.integers(10, 3000))
    lines.insert(at, "deep: " + "[" * depth + "]" * depth + "\n" if draw(st.booleans()) else
                 "deep:\n" + "".join(" " * (2 * i + 2) + f"k{i}:\n" for i in range(min(depth, 300))))
    return name, "".join(lines).encode(), f"deep {depth}"


def _source(name: str) -> Path:
    if name.startswith("models/"):
        return ROOT / "rdusim" / "config" / name
    return ROOT / name


# ------------------------------------------------------------------------ request traces
#: layout -> (header or JSON keys, format of one row from (arrival seconds, prompt, output))
def _azure_time(seconds: float) -> str:
    whole = int(seconds)
    return f"2023-11-16 {whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}." \
           f"{round((seconds - whole) * 1e6):06d}0"


TRACE_LAYOUTS: dict[str, tuple[list[str], Any]] = {
    "azure": (["TIMESTAMP", "ContextTokens", "GeneratedTokens"], lambda t, p, o: [_azure_time(t), p, o]),
    "burstgpt": (["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"],
                 lambda t, p, o: [t, "ChatGPT", p, o, p + o, "Conversation log"]),
    "plain": (["arrival_s", "prompt_tokens", "output_tokens"], lambda t, p, o: [t, p, o]),
    "mooncake": (["timestamp", "input_length", "output_length"], lambda t, p, o: [round(t * 1000), p, o]),
    "plain-jsonl": (["arrival_s", "prompt_tokens", "output_tokens"], lambda t, p, o: [t, p, o]),
}
TRACE_VALUES = st.sampled_from([0, -1, 1.5, 2**63, 10**30, "", " ", "x", "1e400", "nan", "-inf", None, True,
                                "1,2", '"', "\x00", "\u00e9", 1e-320, "0x10", "1_000", [], {}])
ENCODINGS = ["utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"]
NEWLINES = ["\n", "\n", "\r\n", "\r"]


def _trace_text(layout: str, header: list[str], rows: list[list[Any]]) -> str:
    if layout in ("mooncake", "plain-jsonl"):
        return "".join(json.dumps(dict(zip(header, row, strict=False))) + "\n" for row in rows)
    def cell(value: Any) -> str:
        text = str(value)
        return f'"{text}"' if "," in text else text
    return ",".join(header) + "\n" + "".join(",".join(cell(v) for v in row) + "\n" for row in rows)


@st.composite
def valid_traces(draw: st.DrawFn, max_output: int = 2**20) -> tuple[str, str, list[tuple[float, int, int]]]:
    """(layout, text, requests): a well-formed trace in any layout and order, with the requests
    it holds as (arrival seconds, prompt tokens, output tokens) in file order."""
    layout = draw(st.sampled_from(sorted(TRACE_LAYOUTS)))
    header, row = TRACE_LAYOUTS[layout]
    n = draw(st.integers(1, 60))
    times = draw(st.lists(st.integers(0, 36_000_000), min_size=n, max_size=n))   # milliseconds
    prompts = draw(st.lists(st.integers(1, 2**24), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, max_output), min_size=n, max_size=n))
    if draw(st.booleans()):
        times.sort()
    requests = [(t / 1000, p, o) for t, p, o in zip(times, prompts, outputs, strict=True)]
    return layout, _trace_text(layout, header, [row(*r) for r in requests]), requests


@st.composite
def traces(draw: st.DrawFn) -> tuple[bytes, str]:
    """(bytes, description): a trace in any layout, mutated (cells, rows, header), encoded in
    any of several encodings with any line ending; also empty and oversized-number traces."""
    layout, text, requests = draw(valid_traces(max_output=2048))  # a valid run replays them all
    header, row = TRACE_LAYOUTS[layout]
    rows = [row(*r) for r in requests]
    edits = []
    for _ in range(draw(st.integers(0, 3))):
        edit = draw(st.sampled_from(["cell", "cell", "drop_cell", "extra_cell", "blank_row", "duplicate_row",
                                     "header", "truncate", "empty", "shuffle"]))
        edits.append(edit)
        at = draw(st.integers(0, max(0, len(rows) - 1)))
        if edit == "cell" and rows:
            rows[at][draw(st.integers(0, len(rows[at]) - 1))] = draw(TRACE_VALUES)
        elif edit == "drop_cell" and rows and rows[at]:
            rows[at].pop()
        elif edit == "extra_cell" and rows:
            rows[at].append(draw(TRACE_VALUES))
        elif edit == "blank_row":
            rows.insert(at, [""] * len(header))
        elif edit == "duplicate_row" and rows:
            rows.insert(at, list(rows[at]))
        elif edit == "header":
            header = list(header)
            header[draw(st.integers(0, len(header) - 1))] = draw(st.sampled_from(["", " x", "TIMESTAMP", "Ärrival"]))
        elif edit == "empty":
            rows = []
        elif edit == "shuffle":
            rows = draw(st.permutations(rows))
    text = _trace_text(layout, header, rows)
    if "truncate" in edits:
        text = text[: draw(st.integers(0, len(text)))]
    newline = draw(st.sampled_from(NEWLINES))
    encoding = draw(st.sampled_from(ENCODINGS))
    data = text.replace("\n", newline).encode(encoding, errors="replace")
    return data, f"{layout} {edits} {encoding} {newline!r}"[:200]


# ------------------------------------------------------------------------ CLI argument vectors
MAPPINGS = ["mappings/llama-3.1-8b/prefill.yaml", "mappings/llama-3.1-8b/decode.yaml",
            "mappings/deepseek-r1/decode.yaml", "nope.yaml", "adir", "/dev/null", "afile", ""]
OUT_PATHS = ["o.json", "adir", "afile/x", "/proc/x", "no/dir/x", "", "adir/o.csv", "link"]
NUMBERS = ["1", "2", "1024", "4096", "0", "-1", "2", "1099511627776", "1000000000", "abc", "", "nan", "inf",
           "1e3", "1,2", " 8", "1_000"]
SETS = ["workload.batch=2", "workload.batch=true", "defaults.tp=[1,", "name=a: b: c", "name=*foo", "kv_policy.name=snapkv",
        "kv_policy.compression=.inf", "defaults.chunk_tokens=1", "layers.dense.0.shard={attention: {batch: 0}}",
        "nope.deep.key=1", "workload=3", "=", "novalue", "workload.seq_len=2048", "hardware=/dev/null",
        "model=llama-9000", "prefill=decode.yaml", "layers.dense.9.kernel=X", "kv_policy={name: kascade, anchors: 99}"]

_OPTIONS: dict[str, list[tuple[str, list[str]]]] = {
    "simulate": [("--seq-len", NUMBERS), ("--batch", NUMBERS), ("--set", SETS), ("--format", ["json", "csv", "x"]),
                 ("--out", OUT_PATHS), ("--trace", OUT_PATHS), ("--ignore-capacity", []),
                 ("--hw", ["hw_configs/sn40l-16.yaml", "nope.yaml", "adir"])],
    "sweep": [("--seq-len", NUMBERS), ("--batch", ["auto", *NUMBERS]), ("--policy", ["none", "snapstream", "", "x,"]),
              ("--compression", NUMBERS), ("--out", OUT_PATHS), ("--plot", OUT_PATHS)],
    "explore": [("--seq-len", NUMBERS), ("--policy", ["none", "snapstream", ""]), ("--slo-tpot-ms", NUMBERS),
                ("--budget", ["1", "3", "0", "-5", "1000000000000", "x"]), ("--top", ["1", "0", "100000"]),
                ("--seed", NUMBERS), ("--out", OUT_PATHS), ("--objective", ["latency", "x"]),
                ("--dask", ["not-an-address", "tcp://", ":"]), ("--mapping", MAPPINGS)],
    "calibrate": [("--phase", ["prefill", "decode", "x"]), ("--mapping", MAPPINGS), ("--dry-run", []),
                  ("--predict", NUMBERS), ("--max-evaluations", NUMBERS)],
    "numerics": [("--budget", NUMBERS), ("--sink", NUMBERS), ("--window", NUMBERS), ("--pool", NUMBERS),
                 ("--threads", NUMBERS), ("--plot", OUT_PATHS)],
    "validate": [],
    "schema": [],
    "serve": [("--rate", ["1", "0.5", "1e-9", "0", "-1", "nan", "inf", "1e6", "x"]),
              ("--prompt-tokens", ["lognormal:4096,0.5", "fixed:200000", "uniform:1,8192", "lognormal:1e18,3",
                                   "fixed:0", "uniform:5,2", "normal:1", "lognormal:1000,1e6", ""]),
              ("--output-tokens", ["fixed:4", "uniform:1,64", "lognormal:16,2", "fixed:1e30", "x"]),
              ("--arrivals", ["poisson", "gamma:2", "gamma:0", "gamma:1e12", "x"]), ("--seed", NUMBERS),
              ("--trace", ["trace.csv", "nope.csv", "adir", "/dev/null", "afile", "mappings/deepseek-r1/serve.yaml"]),
              ("--time-scale", NUMBERS), ("--slo-ttft-s", NUMBERS), ("--slo-tpot-ms", NUMBERS), ("--out", OUT_PATHS),
              ("--set", ["decode.nodes=2", "decode.nodes=1000000000", "prefill.nodes=0", "layout=colocated",
                         "decode.kv_grid=[1,1]", "interconnect=null", "slo=null", "scheduling=x",
                         "decode.max_batch=3", "prefill.chunk_tokens=512"])],
    "compare-hw": [("--hw", ["hw_configs/h100.yaml", "mappings/llama-3.1-8b/decode-h100.yaml", "hw_configs/sn40l-16.yaml",
                             "nope.yaml", "adir", "mappings/deepseek-r1/serve.yaml", "hw_configs/h100.yaml,,x"]),
                   ("--policy", ["none", "snapstream", "kascade", "x", ""]), ("--batch", ["auto", *NUMBERS]),
                   ("--compression", NUMBERS), ("--out", OUT_PATHS), ("--plot", OUT_PATHS)],
}
#: values that are invalid for every numeric option above: calibrate and numerics always get
#: one, so the fuzzer checks that they are refused before minutes of work start
_ALWAYS_BAD = ["0", "-1", "abc", "", "nan"]


#: the repository's own serving file (never written to): its step-time tables are memoised by
#: path, so every example after the first (tests/fuzz/conftest.py warms them) runs in seconds
SERVE = str(ROOT / "mappings/deepseek-r1/serve.yaml")
_SERVING_FILES = [SERVE, "mappings/llama-3.1-8b/decode-h100.yaml", *MAPPINGS[3:]]
_COMPARED = ["mappings/llama-3.1-8b/decode.yaml", "mappings/llama-3.1-8b/decode-h100.yaml", *MAPPINGS[3:]]


def _positionals(draw: st.DrawFn, command: str) -> list[str]:
    """What a command takes before its options."""
    pick = {"simulate": MAPPINGS, "sweep": MAPPINGS, "schema": ["mapping", "model", "node", "socket", "x", ""],
            "numerics": ["passkey", "divergence", "x"], "serve": _SERVING_FILES}
    if command in pick:
        return [draw(st.sampled_from(pick[command]))]
    if command == "validate":
        return draw(st.lists(st.sampled_from([*MAPPINGS, "hw_configs", "mappings/llama-3.1-8b"]), min_size=1, max_size=3))
    if command == "explore":
        return ["--model", draw(st.sampled_from(["llama-3.1-8b", "nope", ""])),
                "--phase", draw(st.sampled_from(["prefill", "decode", "x"])), "--workers", "1"]
    if command == "compare-hw":
        return [draw(st.sampled_from(_COMPARED)), "--seq-len", draw(st.sampled_from(["4096", *NUMBERS]))]
    return []


def _completed(draw: st.DrawFn, command: str, argv: list[str]) -> list[str]:
    """Options every run of ``command`` gets, so a valid one takes seconds, not minutes."""
    if command in ("calibrate", "numerics"):
        numeric = [o for o, v in _OPTIONS[command] if v is NUMBERS]
        argv += [draw(st.sampled_from(numeric)), draw(st.sampled_from(_ALWAYS_BAD))]
    if command == "sweep":
        argv += ["--workers", "1"]
    if command == "explore" and "--budget" not in argv:
        argv += ["--budget", "3", "--top", "1"]
    if command == "serve" and "--trace" not in argv:
        argv += ["--rate", "1"] if "--rate" not in argv else []
        argv += ["--requests", draw(st.sampled_from(["5", "20", "0", "x"]))]
    if command == "compare-hw" and "--hw" not in argv:
        argv += ["--hw", "hw_configs/h100.yaml"]
    return argv


@st.composite
def cli_argvs(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(_OPTIONS)))
    argv = [command, *_positionals(draw, command)]
    options = _OPTIONS[command]
    for option, values in draw(st.lists(st.sampled_from(options), max_size=4)) if options else []:
        argv += [option] + ([draw(st.sampled_from(values))] if values else [])
    return _completed(draw, command, argv)


# ------------------------------------------------------------------------ the contract
_ARGPARSE = ("argument ", "unrecognized arguments", "the following arguments are required", "invalid choice")


def messages(err: str) -> list[str]:
    """The message lines of a failed run: argparse's one line, or the issue lines below
    ``rdusim CMD: error:`` (argparse's usage text is not a message)."""
    lines = err.split("\n")  # as the CLI prints them: a name may hold \x1e, which splitlines() breaks at
    for line in lines:
        if line.startswith("rdusim ") and ": error: " in line:  # argparse: "rdusim CMD: error: argument --x: ..."
            return [line.split(": error: ", 1)[1]]
    header = next((i for i, line in enumerate(lines) if line.startswith("rdusim ") and line.endswith(": error:")), None)
    if header is None:
        return [line.strip() for line in lines if line.strip()]
    return [line.strip() for line in lines[header + 1:] if line.strip()]


def located(line: str, names: list[str]) -> bool:
    """A message names its file (one of ``names`` or a YAML path) or its option first."""
    if line.startswith(("--", *_ARGPARSE)):
        return True
    head = line.split(": ", 1)[0]
    return bool(re.match(r"\S+\.ya?ml(:\d+| \(--|$)", head)) or any(
        head in (n, repr(n)) or (n and head.startswith(f"{n}:")) for n in names)


def check_contract(result: Run, before: set[Path], after: set[Path], what: str, names: list[str],
                   document: str | None = None) -> None:
    """The promise of the README's "bad input" paragraph, for one run.

    ``names`` are the paths the run was given; ``document`` is the YAML file under test,
    whose messages must carry a line number.
    """
    assert "Traceback" not in result.err, f"{what}: traceback\n{result.err}"
    assert result.code in (0, 2), f"{what}: exit {result.code}\n{result.err}"
    if result.code == 0:
        assert result.seconds < SUCCESS_LIMIT_S, f"{what}: took {result.seconds:.1f} s"
        _assert_finite(result.out, what)
        return
    assert result.seconds < GUARD_S, f"{what}: took {result.seconds:.1f} s to fail"
    assert after <= before, f"{what}: left {sorted(map(str, after - before))}"
    found = messages(result.err)
    assert found, f"{what}: no message\n{result.err}"
    for line in found:
        assert located(line, names), f"{what}: message does not locate the problem: {line}"
        if document is not None and line.startswith(f"{document}:"):
            assert re.match(rf"{re.escape(document)}:\d+: ", line), f"{what}: no line number: {line}"


def _assert_finite(out: str, what: str) -> None:
    text = out.strip()
    if text.startswith("{"):
        def walk(value: Any) -> None:
            if isinstance(value, float):
                assert math.isfinite(value), f"{what}: non-finite {value} in the JSON result"
            elif isinstance(value, dict):
                for item in value.values():
                    walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)
        walk(json.loads(text))
    else:
        assert not re.search(r"(?<![\w.])-?inf(?!\w)", text), f"{what}: inf in the output\n{text[:500]}"
