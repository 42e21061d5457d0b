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
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from rdusim.errors import ConfigError


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

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, int(self.params[0]), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.params[0]), int(self.params[1]), n, endpoint=True, dtype=np.int64)
        median, sigma = self.params
        draws = rng.lognormal(math.log(median), sigma, n)
        return np.maximum(np.rint(draws), 1).astype(np.int64)

    def __str__(self) -> str:
        return f"{self.kind}:{','.join(f'{p:g}' for p in self.params)}"


_ARITY = {"fixed": 1, "uniform": 2, "lognormal": 2}


def parse_distribution(text: str, option: str) -> LengthDistribution:
    """Parse ``KIND:P1[,P2]``; ``option`` names the flag in error messages."""
    kind, sep, rest = text.partition(":")
    if kind not in _ARITY or not sep:
        raise ConfigError(f"{option}: expected lognormal:MEDIAN,SIGMA, fixed:N or uniform:A,B; got {text!r}")
    try:
        params = tuple(float(p) for p in rest.split(","))
    except ValueError:
        raise ConfigError(f"{option}: {text!r}: parameters must be numbers") from None
    if len(params) != _ARITY[kind]:
        raise ConfigError(f"{option}: {kind} takes {_ARITY[kind]} parameter(s), got {text!r}")
    if kind == "fixed" and (params[0] < 1 or params[0] != int(params[0])):
        raise ConfigError(f"{option}: fixed:N needs a whole number of tokens >= 1, got {text!r}")
    if kind == "uniform" and not (1 <= params[0] <= params[1]) or kind == "uniform" and (
            params[0] != int(params[0]) or params[1] != int(params[1])):
        raise ConfigError(f"{option}: uniform:A,B needs whole numbers 1 <= A <= B, got {text!r}")
    if kind == "lognormal" and not (params[0] >= 1 and params[1] >= 0 and math.isfinite(params[1])):
        raise ConfigError(f"{option}: lognormal:MEDIAN,SIGMA needs MEDIAN >= 1 and SIGMA >= 0, got {text!r}")
    return LengthDistribution(kind, params)


def parse_arrivals(text: str) -> float:
    """``poisson`` -> cv 1; ``gamma:CV`` -> cv (the burstiness of the gaps)."""
    if text == "poisson":
        return 1.0
    kind, _, rest = text.partition(":")
    try:
        cv = float(rest) if kind == "gamma" else float("nan")
    except ValueError:
        cv = float("nan")
    if not (cv > 0 and math.isfinite(cv)):
        raise ConfigError(f"--arrivals: expected poisson or gamma:CV with CV > 0, got {text!r}")
    return cv


def generate_workload(rate: float, prompt: LengthDistribution, output: LengthDistribution, *, seed: int = 0,
                      duration_s: float | None = None, requests: int | None = None,
                      cv: float = 1.0) -> Workload:
    """Arrivals at ``rate`` per second for ``duration_s`` seconds (or exactly ``requests``)."""
    if not (rate > 0 and math.isfinite(rate)):
        raise ConfigError(f"--rate: expected a positive number of requests per second, got {rate:g}")
    if (duration_s is None) == (requests is None):
        raise ConfigError("give either a duration or a number of requests")
    if duration_s is not None and not (duration_s > 0 and math.isfinite(duration_s)):
        raise ConfigError(f"--duration: expected a positive number of seconds, got {duration_s:g}")
    if requests is not None and requests <= 0:
        raise ConfigError(f"--requests: expected a positive count, got {requests}")
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


# ------------------------------------------------------------------------ traces

#: layout name -> (file kind, arrival column, time unit in seconds, prompt column, output column)
TRACE_FORMATS: dict[str, tuple[str, str, float, str, str]] = {
    "azure": ("csv", "TIMESTAMP", 0.0, "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("csv", "Timestamp", 1.0, "Request tokens", "Response tokens"),
    "mooncake": ("jsonl", "timestamp", 1e-3, "input_length", "output_length"),
    "plain": ("csv", "arrival_s", 1.0, "prompt_tokens", "output_tokens"),
}


def read_trace(path: str | Path, *, layout: str = "auto", time_scale: float = 1.0) -> Workload:
    """Read a trace file; ``layout`` is one of ``TRACE_FORMATS`` or ``auto`` (from the header)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--trace: file {str(path)!r} not found")
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ConfigError(f"--time-scale: expected a positive factor, got {time_scale:g}")
    with path.open(encoding="utf-8", newline="") as handle:
        first = handle.readline()
    is_json = first.lstrip().startswith("{")
    if layout == "auto":
        layout = _detect(path, first, is_json)
    if layout not in TRACE_FORMATS:
        raise ConfigError(f"--trace-format: expected auto or one of {', '.join(TRACE_FORMATS)}, got {layout!r}")
    rows = _json_rows(path, layout) if is_json else _csv_rows(path, layout)
    arrivals, prompts, outputs, skipped = rows
    if not arrivals:
        raise ConfigError(f"{path}: no requests to replay ({skipped} failed rows skipped)")
    t = np.asarray(arrivals, dtype=float)
    t = (t - t.min()) * time_scale
    return Workload(t, np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64), skipped,
                    source=f"{path.name} ({layout}, time scale {time_scale:g})")


def _detect(path: Path, first: str, is_json: bool) -> str:
    if is_json:
        try:
            keys = set(json.loads(first))
        except (json.JSONDecodeError, TypeError):
            raise ConfigError(f"{path}:1:1: not a JSON object") from None
        for name, (_, arrival, _, prompt, output) in TRACE_FORMATS.items():
            if {arrival, prompt, output} <= keys:
                return name
        raise ConfigError(f"{path}:1: JSONL keys {sorted(keys)} match no known layout "
                          "(mooncake: timestamp, input_length, output_length; plain: arrival_s, "
                          "prompt_tokens, output_tokens)")
    header = [h.strip() for h in next(csv.reader([first]))]
    for name, (kind, arrival, _, prompt, output) in TRACE_FORMATS.items():
        if kind == "csv" and {arrival, prompt, output} <= set(header):
            return name
    raise ConfigError(f"{path}:1: CSV header {header} matches no known layout (azure: TIMESTAMP, ContextTokens, "
                      "GeneratedTokens; burstgpt: Timestamp, Request tokens, Response tokens; plain: arrival_s, "
                      "prompt_tokens, output_tokens)")


def _csv_rows(path: Path, layout: str) -> tuple[list, list, list, int]:
    _, arrival_col, unit, prompt_col, output_col = TRACE_FORMATS[layout]
    arrivals, prompts, outputs, skipped = [], [], [], 0
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in (arrival_col, prompt_col, output_col) if c not in header]
        if missing:
            raise ConfigError(f"{path}:1: {layout} trace: missing column(s) {', '.join(missing)}; header is {header}")
        index = {c: header.index(c) for c in (arrival_col, prompt_col, output_col)}
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise ConfigError(f"{path}:{line}:{min(len(row), len(header)) + 1}: expected {len(header)} "
                                  f"fields ({', '.join(header)}), got {len(row)}")
            where = f"{path}:{line}:{index[arrival_col] + 1}"
            raw = row[index[arrival_col]].strip()
            arrival = _timestamp(raw, where) if unit == 0.0 else _number(raw, where, arrival_col) * unit
            prompt = _tokens(row[index[prompt_col]], f"{path}:{line}:{index[prompt_col] + 1}", prompt_col, 1)
            output = _tokens(row[index[output_col]], f"{path}:{line}:{index[output_col] + 1}", output_col, 0)
            if output == 0:
                if layout == "burstgpt":
                    skipped += 1    # BurstGPT logs failed requests with 0 response tokens
                    continue
                raise ConfigError(f"{path}:{line}:{index[output_col] + 1}: {output_col}: a request "
                                  "generates at least 1 token, got 0")
            arrivals.append(arrival)
            prompts.append(prompt)
            outputs.append(output)
    return arrivals, prompts, outputs, skipped


def _json_rows(path: Path, layout: str) -> tuple[list, list, list, int]:
    _, arrival_col, unit, prompt_col, output_col = TRACE_FORMATS[layout]
    if unit == 0.0:
        raise ConfigError(f"{path}: the {layout} layout is CSV, not JSONL")
    arrivals, prompts, outputs = [], [], []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{path}:{line_no}:{error.colno}: invalid JSON: {error.msg}") from None
            if not isinstance(record, dict):
                raise ConfigError(f"{path}:{line_no}:1: expected a JSON object per line")
            values = []
            for key in (arrival_col, prompt_col, output_col):
                if key not in record:
                    raise ConfigError(f"{path}:{line_no}:1: missing key {key!r}")
                values.append(record[key])
            column = _json_column(line, arrival_col)
            arrivals.append(_number(values[0], f"{path}:{line_no}:{column}", arrival_col) * unit)
            prompts.append(_tokens(values[1], f"{path}:{line_no}:{_json_column(line, prompt_col)}", prompt_col, 1))
            outputs.append(_tokens(values[2], f"{path}:{line_no}:{_json_column(line, output_col)}", output_col, 1))
    return arrivals, prompts, outputs, 0


def _json_column(line: str, key: str) -> int:
    return line.find(f'"{key}"') + 1 or 1


def _number(raw: object, where: str, column: str) -> float:
    try:
        value = float(raw) if not isinstance(raw, bool) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: {column}: expected a non-negative number, got {raw!r}")
    return value


def _tokens(raw: object, where: str, column: str, minimum: int) -> int:
    text = raw.strip() if isinstance(raw, str) else raw
    try:
        value = int(text) if not isinstance(text, (bool, float)) else int("x")
    except (TypeError, ValueError):
        value = -1
    if value < minimum:
        raise ConfigError(f"{where}: {column}: expected a whole number of tokens >= {minimum}, got {raw!r}")
    return value


def _timestamp(raw: str, where: str) -> float:
    """Seconds since the epoch of an Azure-trace timestamp (fractions past microseconds dropped)."""
    date, dot, fraction = raw.partition(".")
    try:
        stamp = datetime.fromisoformat(date + (dot + fraction[:6] if dot else ""))
    except ValueError:
        raise ConfigError(f"{where}: TIMESTAMP: expected a date like 2023-11-16 18:15:46.680590, "
                          f"got {raw!r}") from None
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
