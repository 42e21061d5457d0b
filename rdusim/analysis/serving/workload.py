"""Request workloads for the serving simulation: generated (Poisson, bursty) or read from traces.

Owns: ``Workload``, ``LengthDistribution`` / ``parse_distribution``, ``generate_workload``,
``GeneratedWorkload`` (a generated workload without its rate, which a sweep sets),
``read_trace`` and the trace layouts it reads (``TRACE_FORMATS``). Imports: errors, numpy.

Generated arrivals are a renewal process: inter-arrival gaps with mean ``1 / rate``,
exponential (Poisson arrivals) or gamma with a coefficient of variation ``cv`` (``cv > 1``
is burstier than Poisson). Every random stream comes from one ``numpy.random.Generator``
seeded with ``seed``: gaps, prompt lengths and output lengths each draw from their own
child stream, and gaps are drawn at unit mean then divided by the rate, so the same seed at
two rates gives the same requests, only closer together (common random numbers: rate
sweeps compare like with like).

Traces (arrival, prompt tokens, output tokens per request; arrivals are made relative to
the first request and multiplied by ``time_scale``):

- ``azure``: Azure LLM inference trace CSV, ``TIMESTAMP,ContextTokens,GeneratedTokens``
  (timestamps as ``2023-11-16 18:15:46.6805900``)
- ``burstgpt``: BurstGPT CSV, ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``
  (seconds); rows with 0 response tokens are failed requests: skipped and counted
- ``mooncake``: Mooncake JSONL, ``timestamp`` in milliseconds, ``input_length``, ``output_length``
- ``plain``: CSV ``arrival_s,prompt_tokens,output_tokens`` (or JSONL with those keys)

A malformed row raises ``ConfigError`` with the file, line and column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from rdusim.config.loader import read_text
from rdusim.config.schema import MAX_TOKENS
from rdusim.errors import ConfigError
from rdusim.sim.resources import HORIZON_S
from rdusim.units import format_bytes

# ------------------------------------------------------------------------ input limits
#: the longest output of one request, in tokens: its decode steps run one after another
#: (the engine runs ~30,000 decode steps/s: 891,844 in 30.4 s, benchmarks/RESULTS.md,
#: Serving), so it bounds a run's length to under a minute; 2^20 is far beyond the
#: generation limits of published models (tens of thousands of tokens)
MAX_OUTPUT_TOKENS = 2**20
#: the most requests one run simulates (generated or replayed): ~25 minutes of the request
#: engine at its benchmarked 3,300 requests/s (benchmarks/RESULTS.md, Serving) and ~5 GiB
#: of memory (BYTES_PER_REQUEST); a trace of a few million rows still replays
MAX_REQUESTS = 5_000_000
#: memory one request costs end to end (its workload row, the engine's per-request arrays,
#: the request frame and its CSV): measured with `rdusim serve` at 20,000 and 80,000
#: requests (peak RSS 198 MB and 227 MB: ~0.5 KB per request), doubled for the outputs
BYTES_PER_REQUEST = 1024
#: the largest trace file read: ~5M rows of the Azure layout (~60 bytes a row) with room
MAX_TRACE_BYTES = 512 * 2**20
#: widest lognormal spread: SIGMA = 10 puts the 99th percentile 10^10 times the median
#: (the serve defaults use 0.5 and 0.6)
MAX_SIGMA = 10.0
#: the burstiest arrivals (``gamma:CV``): at CV = 10 most gaps are near zero and a few are
#: huge; the number of gaps drawn up front grows with CV
MAX_CV = 10.0
#: ``--time-scale`` range: a million times faster or slower than the trace
TIME_SCALE_RANGE = (1e-6, 1e6)
#: the longest span of arrivals, in seconds (116 days): the request engine's clock runs on the
#: simulator's horizon (rdusim.sim.resources.HORIZON_S); a week-long published trace is 6e5 s
MAX_SPAN_S = HORIZON_S
#: the largest arrival time a trace row may give (in its own unit; an epoch in
#: microseconds is ~1.7e15): finite after scaling, whatever the layout
MAX_ARRIVAL = 1e18


@dataclass(frozen=True)
class Workload:
    arrival_s: np.ndarray          # float, seconds from the first request
    prompt_tokens: np.ndarray      # int64 >= 1
    output_tokens: np.ndarray      # int64 >= 1
    skipped: int = 0               # trace rows not replayed (failed requests)
    source: str = ""

    def __len__(self) -> int:
        return len(self.arrival_s)


# ------------------------------------------------------------------------ distributions


@dataclass(frozen=True)
class LengthDistribution:
    """Token counts: ``lognormal:MEDIAN,SIGMA``, ``fixed:N`` or ``uniform:A,B`` (inclusive)."""

    kind: str
    params: tuple[float, ...]
    maximum: int = MAX_TOKENS      # the longest length drawn (the lognormal tail is cut there)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, int(self.params[0]), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.params[0]), int(self.params[1]), n, endpoint=True, dtype=np.int64)
        median, sigma = self.params
        draws = rng.lognormal(math.log(median), sigma, n)
        # the tail beyond the maximum is cut there (a prompt that long is then refused by the
        # deployment's max_context, with its reason), never converted past int64
        return np.clip(np.rint(draws), 1, self.maximum).astype(np.int64)

    def __str__(self) -> str:
        return f"{self.kind}:{','.join(f'{p:g}' for p in self.params)}"


_ARITY = {"fixed": 1, "uniform": 2, "lognormal": 2}


def parse_distribution(text: str, option: str, maximum: int = MAX_TOKENS) -> LengthDistribution:
    """Parse ``KIND:P1[,P2]``; ``option`` names the flag in error messages.

    Every parameter is checked against its range here: token counts are whole numbers in
    [1, ``maximum``] (MAX_TOKENS for prompts, MAX_OUTPUT_TOKENS for outputs), a lognormal's
    SIGMA in [0, MAX_SIGMA].
    """
    limit = "MAX_OUTPUT_TOKENS" if maximum == MAX_OUTPUT_TOKENS else "MAX_TOKENS"
    forms = "lognormal:MEDIAN,SIGMA, fixed:N or uniform:A,B"
    kind, sep, rest = text.strip().partition(":")
    kind = kind.strip()
    if kind not in _ARITY or not sep:
        raise ConfigError(f"{option}: expected {forms}; got {text!r}")
    try:
        params = tuple(float(p) for p in rest.split(","))
    except ValueError:
        raise ConfigError(f"{option}: {text!r}: parameters must be numbers ({forms})") from None
    if len(params) != _ARITY[kind]:
        raise ConfigError(f"{option}: {kind} takes {_ARITY[kind]} parameter(s), got {text!r}")
    if not all(math.isfinite(p) for p in params):
        raise ConfigError(f"{option}: {text!r}: parameters must be finite numbers")
    tokens = {"fixed": params, "uniform": params, "lognormal": params[:1]}[kind]
    whole = kind != "lognormal"
    for value in tokens:
        if not (1 <= value <= maximum) or (whole and value != int(value)):
            raise ConfigError(f"{option}: {text!r}: a token count must be {'a whole number ' if whole else ''}"
                              f"in [1, {maximum}] ({limit}), got {value:g}")
    if kind == "uniform" and params[0] > params[1]:
        raise ConfigError(f"{option}: uniform:A,B needs A <= B, got {text!r}")
    if kind == "lognormal" and not 0 <= params[1] <= MAX_SIGMA:
        raise ConfigError(f"{option}: lognormal:MEDIAN,SIGMA needs SIGMA in [0, {MAX_SIGMA:g}], got {params[1]:g}")
    return LengthDistribution(kind, params, maximum)


def parse_arrivals(text: str) -> float:
    """``poisson`` -> cv 1; ``gamma:CV`` -> cv (the burstiness of the gaps)."""
    if text == "poisson":
        return 1.0
    kind, _, rest = text.partition(":")
    try:
        cv = float(rest) if kind == "gamma" else float("nan")
    except ValueError:
        cv = float("nan")
    if not (0 < cv <= MAX_CV):
        raise ConfigError(f"--arrivals: expected poisson or gamma:CV with CV in (0, {MAX_CV:g}], got {text!r}")
    return cv


def generate_workload(rate: float, prompt: LengthDistribution, output: LengthDistribution, *, seed: int = 0,
                      duration_s: float | None = None, requests: int | None = None,
                      cv: float = 1.0) -> Workload:
    """Arrivals at ``rate`` per second for ``duration_s`` seconds (or exactly ``requests``)."""
    check_workload_size(rate, duration_s=duration_s, requests=requests)
    gaps_rng, prompt_rng, output_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    shape = 1.0 / (cv * cv)
    if requests is None:
        expected = rate * duration_s
        n_draw = int(expected + 10 * math.sqrt(expected) * max(cv, 1.0) + 16)
        gaps = gaps_rng.gamma(shape, 1.0 / shape, n_draw)
        while gaps.sum() / rate <= duration_s:   # rare: draw more until the window is covered
            gaps = np.concatenate([gaps, gaps_rng.gamma(shape, 1.0 / shape, n_draw)])
        arrivals = np.cumsum(gaps) / rate
        arrivals = arrivals[arrivals <= duration_s]
    else:
        arrivals = np.cumsum(gaps_rng.gamma(shape, 1.0 / shape, requests)) / rate
    arrivals = arrivals - arrivals[0] if len(arrivals) else arrivals
    n = len(arrivals)
    return Workload(arrivals, prompt.sample(prompt_rng, n), output.sample(output_rng, n),
                    source=f"rate {rate:g}/s, {'poisson' if cv == 1 else f'gamma cv {cv:g}'}, prompt {prompt}, "
                           f"output {output}, seed {seed}")


def check_workload_size(rate: float, *, duration_s: float | None = None, requests: int | None = None) -> int:
    """The number of requests a generated workload will have (its mean for a duration), or
    a ConfigError when an option is out of range or the count exceeds MAX_REQUESTS: refused
    before anything is allocated."""
    if not (rate > 0 and math.isfinite(rate)):
        raise ConfigError(f"--rate: expected a positive number of requests per second, got {rate:g}")
    if (duration_s is None) == (requests is None):
        raise ConfigError("--duration, --requests: give one of them")
    if duration_s is not None and not (duration_s > 0 and math.isfinite(duration_s)):
        raise ConfigError(f"--duration: expected a positive number of seconds, got {duration_s:g}")
    if requests is not None and requests <= 0:
        raise ConfigError(f"--requests: expected a positive count, got {requests}")
    if requests is not None:
        expected, given = float(requests), f"--requests {requests}"
    else:
        expected, given = rate * float(duration_s or 0.0), f"--rate {rate:g} x --duration {duration_s:g} s"
    if expected > MAX_REQUESTS:
        raise ConfigError(f"{given}: about {expected:.3g} requests, which would take about "
                          f"{format_bytes(expected * BYTES_PER_REQUEST)} of memory to simulate; the limit is "
                          f"{MAX_REQUESTS} requests per run (lower the rate or the duration)")
    span = float(duration_s) if duration_s is not None else float(requests) / rate
    if span > MAX_SPAN_S:
        given_span = f"--duration {duration_s:g} s" if duration_s is not None else \
            f"--requests {requests} at --rate {rate:g}/s (about {span:.3g} s of arrivals)"
        raise ConfigError(f"{given_span}: arrivals over more than {MAX_SPAN_S:.0e} s (the simulator's horizon, "
                          "116 days); raise the rate or shorten the run")
    return math.ceil(expected)


# ------------------------------------------------------------------------ traces

#: layout name -> (file kind, arrival column, time unit in seconds, prompt column, output column)
TRACE_FORMATS: dict[str, tuple[str, str, float, str, str]] = {
    "azure": ("csv", "TIMESTAMP", 0.0, "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("csv", "Timestamp", 1.0, "Request tokens", "Response tokens"),
    "mooncake": ("jsonl", "timestamp", 1e-3, "input_length", "output_length"),
    "plain": ("csv", "arrival_s", 1.0, "prompt_tokens", "output_tokens"),
}


Progress = Callable[[int, int], None]


def read_trace(path: str | Path, *, layout: str = "auto", time_scale: float = 1.0,
               progress: Progress | None = None) -> Workload:
    """Read a trace file; ``layout`` is one of ``TRACE_FORMATS`` or ``auto`` (from the header).

    The file goes through the same reader as the YAML documents (``read_text``: a regular
    file, at most MAX_TRACE_BYTES, UTF-8, a byte-order mark dropped); every bad row is a
    ConfigError at ``FILE:LINE:COLUMN``. ``progress(bytes_read, total_bytes)`` is called
    every few thousand rows.
    """
    lo, hi = TIME_SCALE_RANGE
    if not (lo <= time_scale <= hi):
        raise ConfigError(f"--time-scale: expected a factor in [{lo:g}, {hi:g}], got {time_scale:g}")
    if layout != "auto" and layout not in TRACE_FORMATS:
        raise ConfigError(f"--trace-format: expected auto or one of {', '.join(TRACE_FORMATS)}, got {layout!r}")
    text = read_text(path, "--trace", limit=MAX_TRACE_BYTES, expected="a request trace, CSV or JSONL")
    path = Path(path)
    if not text.strip():
        raise ConfigError(f"{path}:1: an empty trace; expected a CSV header or JSON lines")
    first = next(line for line in io.StringIO(text, newline="") if line.strip())
    is_json = first.lstrip().startswith("{")
    if layout == "auto":
        layout = _detect(path, text, first, is_json)
    reader = _Rows(path, layout, len(text), progress)
    if is_json:
        _json_rows(text, reader)
    else:
        _csv_rows(text, reader)
    if not reader.arrivals:
        raise ConfigError(f"{path}: no requests to replay ({reader.skipped} failed rows skipped)")
    t = np.asarray(reader.arrivals, dtype=float)
    t = (t - t.min()) * time_scale
    if t.max() > MAX_SPAN_S:
        row = int(np.argmax(t > MAX_SPAN_S))
        raise ConfigError(f"{path}:{reader.lines[row]}: this request arrives {t[row]:.3g} s after the first "
                          f"(x --time-scale {time_scale:g}); the arrivals must span at most {MAX_SPAN_S:.0e} s "
                          "(the simulator's horizon, 116 days): replay a part, or a smaller --time-scale")
    return Workload(t, np.asarray(reader.prompts, dtype=np.int64), np.asarray(reader.outputs, dtype=np.int64),
                    reader.skipped, source=f"{path.name} ({layout}, time scale {time_scale:g})")


def _detect(path: Path, text: str, first: str, is_json: bool) -> str:
    line = len(io.StringIO(text[: text.index(first)], newline="").readlines()) + 1
    if is_json:
        try:
            keys = json.loads(first)
        except (ValueError, RecursionError) as error:
            column = error.colno if isinstance(error, json.JSONDecodeError) else 1
            raise ConfigError(f"{path}:{line}:{column}: invalid JSON: {getattr(error, 'msg', str(error)[:80])}") from None
        if not isinstance(keys, dict):
            raise ConfigError(f"{path}:{line}:1: expected a JSON object per line")
        for name, (_, arrival, _, prompt, output) in TRACE_FORMATS.items():
            if {arrival, prompt, output} <= set(keys):
                return name
        raise ConfigError(f"{path}:{line}: JSONL keys {sorted(keys)[:20]} match no known layout "
                          "(mooncake: timestamp, input_length, output_length; plain: arrival_s, "
                          "prompt_tokens, output_tokens)")
    header = _header(first, f"{path}:{line}")
    for name, (kind, arrival, _, prompt, output) in TRACE_FORMATS.items():
        if kind == "csv" and {arrival, prompt, output} <= set(header):
            return name
    raise ConfigError(f"{path}:{line}: CSV header {header[:20]} matches no known layout (azure: TIMESTAMP, "
                      "ContextTokens, GeneratedTokens; burstgpt: Timestamp, Request tokens, Response tokens; "
                      "plain: arrival_s, prompt_tokens, output_tokens)")


def _header(line: str, where: str) -> list[str]:
    try:
        return [h.strip() for h in next(csv.reader([line]), [])]
    except csv.Error as error:
        raise ConfigError(f"{where}: the header is not valid CSV ({error})") from None


class _Rows:
    """The requests read so far, with the request-count limit and progress."""

    def __init__(self, path: Path, layout: str, size: int, progress: Progress | None) -> None:
        self.path, self.layout, self.size, self.progress = path, layout, size, progress
        self.arrivals: list[float] = []
        self.lines: list[int] = []
        self.prompts: list[int] = []
        self.outputs: list[int] = []
        self.skipped = 0

    def add(self, line: int, arrival: float, prompt: int, output: int, position: int) -> None:
        if len(self.arrivals) >= MAX_REQUESTS:
            raise ConfigError(f"{self.path}:{line}: more than {MAX_REQUESTS} requests (the limit per run; about "
                              f"{format_bytes(MAX_REQUESTS * BYTES_PER_REQUEST)} of memory to simulate them); "
                              "replay a part of the trace")
        self.arrivals.append(arrival)
        self.lines.append(line)
        self.prompts.append(prompt)
        self.outputs.append(output)
        if self.progress is not None and len(self.arrivals) % 8192 == 0:
            self.progress(position, self.size)


def _csv_rows(text: str, rows: _Rows) -> None:
    path, layout = rows.path, rows.layout
    _, arrival_col, unit, prompt_col, output_col = TRACE_FORMATS[layout]
    handle = io.StringIO(text, newline="")
    reader = csv.reader(handle)
    try:
        header: list[str] = []
        while not any(header):
            row = next(reader, None)
            if row is None:
                raise ConfigError(f"{path}:{reader.line_num}: {layout} trace: no header row")
            header = [h.strip() for h in row]
        missing = [c for c in (arrival_col, prompt_col, output_col) if c not in header]
        if missing:
            raise ConfigError(f"{path}:{reader.line_num}: {layout} trace: missing column(s) {', '.join(missing)}; "
                              f"header is {header[:20]}")
        index = {c: header.index(c) for c in (arrival_col, prompt_col, output_col)}
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise ConfigError(f"{path}:{line}:{min(len(row), len(header)) + 1}: expected {len(header)} "
                                  f"fields ({', '.join(header[:20])}), got {len(row)}")
            where = f"{path}:{line}:{index[arrival_col] + 1}"
            raw = row[index[arrival_col]].strip()
            arrival = _timestamp(raw, where) if unit == 0.0 else _number(raw, where, arrival_col) * unit
            prompt = _tokens(row[index[prompt_col]], f"{path}:{line}:{index[prompt_col] + 1}", prompt_col, 1)
            output = _tokens(row[index[output_col]], f"{path}:{line}:{index[output_col] + 1}", output_col, 0,
                             MAX_OUTPUT_TOKENS)
            if output == 0:
                if layout == "burstgpt":
                    rows.skipped += 1    # BurstGPT logs failed requests with 0 response tokens
                    continue
                raise ConfigError(f"{path}:{line}:{index[output_col] + 1}: {output_col}: a request "
                                  "generates at least 1 token, got 0")
            rows.add(line, arrival, prompt, output, handle.tell())
    except csv.Error as error:
        raise ConfigError(f"{path}:{reader.line_num}: not valid CSV ({error})") from None


def _json_rows(text: str, rows: _Rows) -> None:
    path, layout = rows.path, rows.layout
    _, arrival_col, unit, prompt_col, output_col = TRACE_FORMATS[layout]
    if unit == 0.0:
        raise ConfigError(f"{path}: the {layout} layout is CSV, not JSONL")
    position = 0
    for line_no, line in enumerate(io.StringIO(text, newline=""), 1):  # \n, \r\n or \r
        position += len(line)
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as error:  # ValueError: also an integer of 5000 digits
            msg = error.msg if isinstance(error, json.JSONDecodeError) else str(error)[:80] or "nested too deeply"
            col = error.colno if isinstance(error, json.JSONDecodeError) else 1
            raise ConfigError(f"{path}:{line_no}:{col}: invalid JSON: {msg}") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{path}:{line_no}:1: expected a JSON object per line")
        values = []
        for key in (arrival_col, prompt_col, output_col):
            if key not in record:
                raise ConfigError(f"{path}:{line_no}:1: missing key {key!r}")
            values.append(record[key])
        arrival = _number(values[0], f"{path}:{line_no}:{_json_column(line, arrival_col)}", arrival_col) * unit
        prompt = _tokens(values[1], f"{path}:{line_no}:{_json_column(line, prompt_col)}", prompt_col, 1)
        output = _tokens(values[2], f"{path}:{line_no}:{_json_column(line, output_col)}", output_col, 1,
                         MAX_OUTPUT_TOKENS)
        rows.add(line_no, arrival, prompt, output, position)


def _json_column(line: str, key: str) -> int:
    return line.find(f'"{key}"') + 1 or 1


def _number(raw: object, where: str, column: str) -> float:
    try:
        value = float(raw) if not isinstance(raw, bool) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    if not (0 <= value <= MAX_ARRIVAL):
        raise ConfigError(f"{where}: {column}: expected a number in [0, {MAX_ARRIVAL:g}], got {_shown(raw)}")
    return value


def _tokens(raw: object, where: str, column: str, minimum: int, maximum: int = MAX_TOKENS) -> int:
    text = raw.strip() if isinstance(raw, str) else raw
    try:
        value = int(text) if not isinstance(text, (bool, float)) else int("x")
    except (TypeError, ValueError):
        value = -1
    if not minimum <= value <= maximum:
        raise ConfigError(f"{where}: {column}: expected a whole number of tokens in [{minimum}, {maximum}], "
                          f"got {_shown(raw)}")
    return value


def _shown(raw: object) -> str:
    """A cell as the message quotes it (a huge cell is cut)."""
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def _timestamp(raw: str, where: str) -> float:
    """Seconds since the epoch of an Azure-trace timestamp (fractions past microseconds dropped)."""
    date, dot, fraction = raw.partition(".")
    try:
        stamp = datetime.fromisoformat(date + (dot + fraction[:6] if dot else ""))
    except ValueError:
        raise ConfigError(f"{where}: TIMESTAMP: expected a date like 2023-11-16 18:15:46.680590, "
                          f"got {_shown(raw)}") from None
    return stamp.replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class GeneratedWorkload:
    """A generated workload without its rate (a sweep sets that)."""

    prompt: LengthDistribution
    output: LengthDistribution
    duration_s: float | None = 600.0
    requests: int | None = None
    seed: int = 0
    cv: float = 1.0

    def at(self, rate: float) -> Workload:
        return generate_workload(rate, self.prompt, self.output, seed=self.seed, duration_s=self.duration_s,
                                 requests=self.requests, cv=self.cv)
