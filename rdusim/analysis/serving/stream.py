"""A serving run measured as it goes: bounded memory for any number of requests.

Owns: ``StreamedMeasure``, the engine's sink (``rdusim.sim.serving.ServingSink``) that turns the
settled requests into ``requests.csv`` rows as they finish (in request order: a request waits
only for the earlier ones still in the system) and the decode steps into the summary, the batch
histogram, the latency CDF points and the head of the Perfetto trace, with the same figures,
bit for bit, as ``metrics`` computes from the whole run in memory. Imports: metrics, exact,
sim (the sink's record layout), numpy, pandas. Writes the CSV text to the handle it is given and
temporary files (``exact.Spill``).

What stays in memory: the records of the requests in flight, a slice of rows before it is
written, the first ``TRACE_REQUESTS`` requests and the steps up to their last finish (the trace
draws only those), and counters. Every column an exact figure needs (latencies, ITLs and their
weights, step durations, tokens, histogram keys) goes to temporary files and is read back a
bounded run at a time (``exact``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TextIO

import numpy as np
import pandas as pd

from rdusim.analysis.serving.exact import SORT_RUN, SortedColumn, Spill, pairwise_sum, partition
from rdusim.analysis.serving.metrics import (
    Slo,
    assemble_summary,
    cdf_fractions,
    cdf_ranks,
    histogram_frame,
    histogram_groups,
    histogram_key,
    rejection_counts,
    rejection_kinds,
    request_rows,
)
from rdusim.sim.serving import RECORD_FIELDS, REQUEST_FIELDS

#: requests the Perfetto trace shows (the first ones)
TRACE_REQUESTS = 20000
#: rows of requests.csv formatted at a time
CSV_ROWS = 16384
#: a histogram group of more than this many ranges of steps is summed a chunk at a time
BIG_GROUP = 4
_TRACE_STEPS = ("node", "start_s", "duration_s", "active", "bucket")


def last_finish(finish_s: np.ndarray) -> float:
    """The last of the trace's requests' finishes (NaN: not finished), how far its decode steps
    go; infinite when none finished."""
    return float(np.nanmax(finish_s)) if len(finish_s) and not np.all(np.isnan(finish_s)) else np.inf


class StreamedMeasure:
    """The sink of one run: ``request`` and ``steps`` as the engine settles them, ``finish`` at the end."""

    def __init__(self, arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, names: list[str], slo: Slo,
                 csv: TextIO | None = None, rows: int = CSV_ROWS, trace_requests: int = TRACE_REQUESTS,
                 run: int = SORT_RUN) -> None:
        self.inputs = (np.asarray(arrival, dtype=float), np.asarray(prompt), np.asarray(output))
        self.names = dict(enumerate(names))
        self.slo, self.csv, self.rows, self.trace_requests, self.run = slo, csv, rows, trace_requests, run
        self.pending: dict[int, tuple[list | None, str]] = {}   # settled, waiting for an earlier request
        self.next = 0                                             # the first request not yet in a slice
        self.slice: list[list] = []
        self.reasons: dict[int, str] = {}
        self.first = 0                                            # request id of the slice's first row
        self.wrote_header = False
        # the requests' part of the summary
        self.counts = {"requests": 0, "completed": 0, "rejected": 0, "input_tokens": 0, "output_tokens": 0,
                       "good": 0}
        self.kinds: dict[str, int] = {}
        self.latency = {m: SortedColumn(run=run) for m in ("ttft_s", "tpot_s", "e2e_s")}
        self.shipped = Spill({"bytes": np.float64})
        # the steps' part
        self.itl = SortedColumn(weighted=True, run=run)
        self.step_spill = Spill({"duration": np.float64, "active": np.uint32, "bucket": np.uint32,
                                 "tokens": np.float64})
        self.active_total = 0
        self.key_counts: dict[int, int] = {}
        # the trace's head
        self.head_frames: list[pd.DataFrame] = []
        self.head_records: list[dict[str, np.ndarray]] = []
        self.horizon: float | None = None                         # the head's last finish, once known
        self.trace_steps: list[dict[str, np.ndarray]] = []
        self.trace_full = False

    # ---------------------------------------------------------------- the sink
    def request(self, request: int, record: list | None, reason: str) -> None:
        self.pending[request] = (record, reason)
        if request != self.next:
            return
        pending, i, rows = self.pending, self.next, self.slice
        while i in pending:
            record, reason = pending.pop(i)
            if record is None:
                self.reasons[i] = reason
                record = _REJECTED
            rows.append(record)
            i += 1
        self.next = i
        if len(rows) >= self.rows:
            self.flush()

    def steps(self, columns: dict[str, np.ndarray]) -> None:
        active = columns["active"]
        self.itl.append(columns["itl_s"], active)
        self.step_spill.append(duration=columns["duration_s"], active=active, bucket=columns["bucket"],
                               tokens=columns["tokens"])
        self.active_total += int(active.sum(dtype=np.uint64))
        keys, counts = np.unique(histogram_key(columns["bucket"], active), return_counts=True)
        for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
            self.key_counts[key] = self.key_counts.get(key, 0) + count
        if not self.trace_full:
            self.keep_trace_steps(columns)

    def keep_trace_steps(self, columns: dict[str, np.ndarray]) -> None:
        kept = {n: columns[n] for n in _TRACE_STEPS}
        if self.horizon is not None:
            upto = int(np.searchsorted(kept["start_s"], self.horizon, side="right"))
            self.trace_full = upto < len(kept["start_s"])
            kept = {n: c[:upto] for n, c in kept.items()}
        if len(kept["start_s"]):
            self.trace_steps.append({n: c.copy() for n, c in kept.items()})

    # ---------------------------------------------------------------- a slice of requests
    def flush(self) -> None:
        """Rows ``first`` to ``next``: to the CSV and the summary's counters and columns."""
        if not self.slice:
            return
        first, count = self.first, len(self.slice)
        arrival, prompt, output = (a[first:first + count] for a in self.inputs)
        values = np.array(self.slice, dtype=float).reshape(count, len(RECORD_FIELDS))
        r = {"arrival_s": arrival, "prompt_tokens": prompt.astype(float), "output_tokens": output.astype(float)}
        r |= {name: values[:, i].copy() for i, name in enumerate(RECORD_FIELDS)}
        del values
        frame = request_rows(r, first, self.reasons, self.names, self.slo)
        if self.csv is not None:
            self.csv.write(frame.to_csv(index=False, header=not self.wrote_header))
            self.wrote_header = True
        self.measure(frame)
        if first < self.trace_requests:
            upto = min(count, self.trace_requests - first)
            self.head_frames.append(frame.iloc[:upto])
            self.head_records.append({n: r[n][:upto] for n in REQUEST_FIELDS})
            if first + upto == self.trace_requests:
                self.set_horizon()
        self.first, self.slice, self.reasons = first + count, [], {}

    def measure(self, frame: pd.DataFrame) -> None:
        """What ``metrics.summarise`` takes from these rows."""
        done = frame.loc[frame["status"] == "done", ["prompt_tokens", "output_tokens", "kv_bytes_shipped", "ttft_s",
                                                      "tpot_s", "e2e_s"]]
        c = self.counts
        c["requests"] += len(frame)
        c["completed"] += len(done)
        c["rejected"] += int((frame["status"] == "rejected").sum())
        c["input_tokens"] += int(done["prompt_tokens"].sum())
        c["output_tokens"] += int(done["output_tokens"].sum())
        c["good"] += int(frame["met_slo"].sum())
        shipped = done["kv_bytes_shipped"].to_numpy()
        self.shipped.append(bytes=np.where(np.isnan(shipped), 0.0, shipped))   # pandas' sum: NaN counts as 0
        for metric in ("ttft_s", "tpot_s", "e2e_s"):
            self.latency[metric].append(done[metric].to_numpy())
        for kind, count in rejection_kinds(frame).value_counts(sort=False).items():
            self.kinds[str(kind)] = self.kinds.get(str(kind), 0) + int(count)

    def set_horizon(self) -> None:
        finish = np.concatenate([r["finish_s"] for r in self.head_records])
        self.horizon = last_finish(finish)
        if self.trace_steps:
            steps = {n: np.concatenate([c[n] for c in self.trace_steps]) for n in _TRACE_STEPS}
            self.trace_steps = []
            self.keep_trace_steps(steps)

    # ---------------------------------------------------------------- the end
    def finish(self, end_s: float) -> dict[str, Any]:
        """The summary, batch histogram, latency CDF points and trace head of the whole run."""
        if self.pending:
            raise RuntimeError(f"requests settled but never written: {sorted(self.pending)[:5]} ...")
        self.flush()
        if self.csv is not None and not self.wrote_header:   # no requests: the header alone
            self.csv.write(request_rows({f: np.empty(0) for f in REQUEST_FIELDS}, 0, {}, self.names,
                                        self.slo).to_csv(index=False))
        if self.horizon is None and self.head_records:
            self.set_horizon()
        counts = dict(self.counts, kv_bytes_shipped=float(pairwise_sum(
            (c["bytes"] for c in self.shipped.chunks()), self.shipped.n)))
        latency, cdf = {}, {}
        for metric, prefix in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("e2e_s", "e2el")):
            column = self.latency[metric]
            ranks = cdf_ranks(column.n)
            out, at = column.stats(prefix, ranks)
            latency |= out
            cdf[metric] = (at, cdf_fractions(ranks, column.n))
        summary = assemble_summary(end_s, self.slo, counts, latency, self.step_summary(),
                                   rejection_counts(None, self.kinds))
        return {"summary": summary, "batch_histogram": self.histogram(), "latency": cdf, "head": self.head()}

    def step_summary(self) -> dict[str, Any]:
        """``metrics.step_summary`` of the steps streamed."""
        n, chunks = self.step_spill.n, self.step_spill.chunks
        out, _ = self.itl.stats("itl")
        if n:   # np.average(active, weights=duration): sum(active x duration) / sum(duration), each pairwise
            weight = pairwise_sum((c["duration"] for c in chunks(names=["duration"])), n)
            product = pairwise_sum((np.multiply(c["active"], c["duration"], dtype=float)
                                    for c in chunks(names=["active", "duration"])), n)
            out["mean_decode_batch"] = float(product / weight)
        else:
            out["mean_decode_batch"] = 0.0
        tokens = pairwise_sum((c["tokens"] for c in chunks(names=["tokens"])), n)
        active = np.uint64(self.active_total)
        out["mean_tokens_per_step"] = float(tokens / active) if active else 0.0
        buckets: dict[int, int] = {}
        for key, count in sorted(self.key_counts.items()):
            buckets[key >> 32] = buckets.get(key >> 32, 0) + count
        out["decode_steps_per_batch_bucket"] = {str(b): c for b, c in sorted(buckets.items())}
        return out

    def histogram(self) -> pd.DataFrame:
        """``metrics.batch_histogram``: the steps partitioned into ranges of whole groups of about
        ``run`` steps, each grouped by pandas as the whole column is (a group's sum runs over its
        own steps in order; a range of one group gets a dummy group beside it, as the whole column
        of several groups has)."""
        keys = np.array(sorted(self.key_counts), dtype=np.int64)
        if not len(keys):
            return histogram_frame(*histogram_groups(np.empty(0, dtype=np.int64), np.empty(0)))
        # ranges of whole groups of about ``run`` steps; a group of more than BIG_GROUP runs alone,
        # summed here as pandas sums it (compensated, over its steps in order) a chunk at a time
        starts, alone, held = [], [], self.run
        for key in keys.tolist():
            size = self.key_counts[key]
            big = size > BIG_GROUP * self.run and len(keys) > 1
            if big or held + size > self.run or alone and alone[-1]:
                starts.append(key)
                alone.append(big)
                held = 0
            held += size
        starts = np.array(starts, dtype=np.int64)

        def assign(c: dict[str, np.ndarray]) -> np.ndarray:
            return np.searchsorted(starts, histogram_key(c["bucket"], c["active"]), side="right") - 1

        parts = partition(self.step_spill, assign, len(starts), ("duration", "active", "bucket")) \
            if len(starts) > 1 else [self.step_spill]
        found = []
        for part, big, first in zip(parts, alone, starts.tolist(), strict=True):
            if big:
                total = kahan_sum(c["duration"] for c in part.chunks(names=["duration"]))
                found.append((np.array([first], dtype=np.int64), np.array([part.n], dtype=np.int64),
                              np.array([total])))
                part.close()
                continue
            key, duration = histogram_key(part.column("bucket"), part.column("active")), part.column("duration")
            lone = len(parts) > 1 and key.min() == key.max()
            if lone:   # pandas sums a lone group another way than a group among others: one more, dropped
                key, duration = np.append(key, -1), np.append(duration, 0.0)
            groups = histogram_groups(key, duration)
            found.append(tuple(g[1:] for g in groups) if lone else groups)
            if part is not self.step_spill:
                part.close()
        return histogram_frame(*(np.concatenate([f[i] for f in found]) for i in range(3)))

    def head(self) -> tuple[pd.DataFrame, dict[str, np.ndarray], dict[str, np.ndarray]] | None:
        """The first ``trace_requests`` requests' rows and records, and the decode steps up to their
        last finish (what ``perfetto.serving_trace`` draws)."""
        if not self.head_frames:
            return None
        frame = pd.concat(self.head_frames, ignore_index=True) if len(self.head_frames) > 1 else self.head_frames[0]
        records = {n: np.concatenate([r[n] for r in self.head_records]) for n in REQUEST_FIELDS}
        steps = {n: np.concatenate([c[n] for c in self.trace_steps]) if self.trace_steps else np.empty(0)
                 for n in _TRACE_STEPS}
        return frame, records, steps

    def close(self) -> None:
        for column in (*self.latency.values(), self.itl):
            column.close()
        self.shipped.close()
        self.step_spill.close()


_REJECTED = [float("nan")] * len(RECORD_FIELDS)


def kahan_sum(chunks: Iterable[np.ndarray]) -> float:
    """Compensated sum in order, the operations of pandas' groupby sum (``group_sum``)."""
    total = compensation = 0.0
    for chunk in chunks:
        for value in chunk.tolist():
            y = value - compensation
            t = total + y
            compensation = t - total - y
            total = t
    return total
