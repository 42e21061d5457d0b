"""Exact summaries of long columns without holding them in memory.

Owns: ``Spill`` (columns appended in chunks to anonymous temporary files, read back in order),
``pairwise_sum`` (numpy's ``np.add.reduce`` of a column, bit for bit, from a stream of chunks),
``SortedColumn`` (values, optionally weighted, sorted by an external sort: numpy's stable sort of
the whole column, a bounded run at a time) with ``stats`` (mean, median, p90, p99 exactly as
``metrics.stats`` computes them) and ``partition``. Imports: numpy. Writes only temporary files
(deleted when closed or collected).

Why this works bit for bit: numpy sums a contiguous float64 array pairwise over the whole array
(blocks of at most 128 summed with eight accumulators, larger ranges split at half the length
rounded down to a multiple of 8), so the sum of n values is fixed by n and the order of the values;
``pairwise_sum`` walks the same tree over a stream, reading one leaf range at a time. A weighted
percentile needs the values sorted and the running weight at each, and a weighted mean the sum of
value x weight in that order: ``SortedColumn`` produces the sorted order a run at a time (values
partitioned into value ranges, each range sorted stably in memory), ties in the order appended.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO

import numpy as np

#: values read back from a spill at a time
READ_CHUNK = 1 << 16
#: most values an external sort aims to hold in memory at once (a range of it)
SORT_RUN = 1 << 18
#: numpy's pairwise sum: ranges up to this many values (at least 128) are summed by one
#: ``np.add.reduce`` call here
LEAF = 1 << 16
#: values kept to choose the external sort's range boundaries (a regular subsample)
SAMPLE = 1 << 14

QUANTILES = (("median", 0.5), ("p90", 0.9), ("p99", 0.99))


class Spill:
    """Columns of fixed dtypes appended together in chunks, each to its own anonymous temporary
    file, and read back in the order appended (a bounded chunk at a time)."""

    def __init__(self, dtypes: dict[str, np.dtype | type | str]) -> None:
        self.dtypes = {name: np.dtype(d) for name, d in dtypes.items()}
        self.files: dict[str, IO[bytes]] = {name: tempfile.TemporaryFile() for name in self.dtypes}
        self.n = 0

    def append(self, **columns: np.ndarray) -> None:
        lengths = {len(c) for c in columns.values()}
        if set(columns) != set(self.dtypes) or len(lengths) != 1:
            raise ValueError(f"a spill of {sorted(self.dtypes)} needs every column, of one length")
        for name, column in columns.items():
            self.files[name].write(np.ascontiguousarray(column, dtype=self.dtypes[name]).tobytes())
        self.n += lengths.pop()

    def chunks(self, size: int | None = None, names: Iterable[str] | None = None) -> Iterator[dict[str, np.ndarray]]:
        """The columns (``names``: only these) from the start, ``size`` rows at a time."""
        size = READ_CHUNK if size is None else size
        dtypes = {name: self.dtypes[name] for name in (self.dtypes if names is None else names)}
        for name in dtypes:
            self.files[name].flush()
            self.files[name].seek(0)
        left = self.n
        while left > 0:
            count = min(size, left)
            yield {name: np.frombuffer(self.files[name].read(count * dtype.itemsize), dtype=dtype)
                   for name, dtype in dtypes.items()}
            left -= count

    def column(self, name: str) -> np.ndarray:
        """One whole column in memory, read-only (a range of an external sort)."""
        handle = self.files[name]
        handle.flush()
        handle.seek(0)
        return np.frombuffer(handle.read(), dtype=self.dtypes[name])

    def close(self) -> None:
        for handle in self.files.values():
            handle.close()


class _Reader:
    """Take the next ``m`` values of a stream of chunks, as one contiguous array."""

    def __init__(self, chunks: Iterable[np.ndarray]) -> None:
        self.chunks = iter(chunks)
        self.pending: np.ndarray = np.empty(0)

    def take(self, m: int) -> np.ndarray:
        parts, need = [], m
        while need:
            if not len(self.pending):
                self.pending = np.asarray(next(self.chunks), dtype=float)
                continue
            part, self.pending = self.pending[:need], self.pending[need:]
            parts.append(part)
            need -= len(part)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _pairwise(reader: _Reader, n: int) -> np.float64:
    if n <= max(LEAF, 128):   # numpy sums up to 128 values (PW_BLOCKSIZE) without splitting
        return np.add.reduce(reader.take(n))
    half = n // 2
    half -= half % 8   # numpy's split (loops_utils.h.src, pairwise_sum)
    left = _pairwise(reader, half)
    return left + _pairwise(reader, n - half)


def pairwise_sum(chunks: Iterable[np.ndarray], n: int) -> np.float64:
    """``np.add.reduce`` (what ``ndarray.sum`` does) of the ``n`` float64 values the chunks hold,
    in order, bit for bit, holding one range of at most ``LEAF`` values at a time."""
    if n == 0:
        return np.float64(0.0)
    return _pairwise(_Reader(chunks), n)


def partition(spill: Spill, assign: Callable[[dict[str, np.ndarray]], np.ndarray], parts: int,
              names: Iterable[str] | None = None) -> list[Spill]:
    """Split a spill's rows (``names``: only these columns) into ``parts`` spills by
    ``assign(chunk)`` (a part index per row), each keeping the rows' order."""
    names = list(spill.dtypes if names is None else names)
    out = [Spill({name: spill.dtypes[name] for name in names}) for _ in range(parts)]
    for chunk in spill.chunks(names=names):
        where = assign(chunk)
        order = np.argsort(where, kind="stable")
        bounds = np.searchsorted(where[order], np.arange(parts + 1))
        for p in range(parts):
            if bounds[p + 1] > bounds[p]:
                rows = order[bounds[p]:bounds[p + 1]]
                out[p].append(**{name: column[rows] for name, column in chunk.items()})
    return out


class SortedColumn:
    """Float values, optionally with non-negative integer weights, appended in chunks (NaN
    dropped); read back sorted by value with ties in the order appended, which is what numpy's
    stable argsort of the whole column gives, through an external sort (``SORT_RUN`` values
    at a time, about: the value ranges come from a regular subsample)."""

    def __init__(self, weighted: bool = False, run: int = SORT_RUN) -> None:
        self.weighted = weighted
        self.run = run
        self.spill = Spill({"value": np.float64, "weight": np.uint32} if weighted else {"value": np.float64})
        self.total_weight = 0
        self.sample: list[np.ndarray] = []
        self.sampled = 0
        self.stride = 1

    @property
    def n(self) -> int:
        return self.spill.n

    def append(self, values: np.ndarray, weights: np.ndarray | None = None) -> None:
        values = np.asarray(values, dtype=float)
        keep = ~np.isnan(values)
        if not keep.all():
            values = values[keep]
            weights = None if weights is None else np.asarray(weights)[keep]
        if not len(values):
            return
        start = (-self.n) % self.stride   # the sample: every stride-th value of the column
        self.sample.append(values[start::self.stride].copy())
        self.sampled += len(self.sample[-1])
        if self.weighted:
            weights = np.asarray(weights)
            self.total_weight += int(weights.sum(dtype=np.uint64))
            self.spill.append(value=values, weight=weights)
        else:
            self.total_weight += len(values)
            self.spill.append(value=values)
        if self.sampled > 2 * SAMPLE:     # keep every other: the stride doubles (stays regular)
            whole = np.concatenate(self.sample)[::2]
            self.sample, self.sampled, self.stride = [whole], len(whole), self.stride * 2

    def sorted_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """(values, weights) in sorted order, a range at a time."""
        if self.n == 0:
            return
        parts = -(-self.n // self.run)
        bounds = np.empty(0)
        if parts == 1:
            ranges = [self.spill]
        else:   # range k holds bounds[k-1] <= value < bounds[k]; a value the sample holds often gets a range
            sample = np.sort(np.concatenate(self.sample))   # of its own (then already in order: not loaded)
            quantiles = sample[(len(sample) * np.arange(1, parts)) // parts]
            bounds = np.unique(np.concatenate([quantiles, np.nextafter(quantiles, np.inf)]))
            ranges = partition(self.spill, lambda c: np.searchsorted(bounds, c["value"], side="right"),
                               len(bounds) + 1)
        try:
            for k, part in enumerate(ranges):
                if not part.n:
                    continue
                if 0 < k < len(bounds) and bounds[k] == np.nextafter(bounds[k - 1], np.inf):
                    for chunk in part.chunks():   # one value: ties in the order appended
                        yield chunk["value"], chunk.get("weight")
                    continue
                values = part.column("value")
                order = np.argsort(values, kind="stable")
                values = values[order]
                weights = part.column("weight")[order] if self.weighted else None
                del order
                yield values, weights
        finally:
            if len(ranges) > 1 or ranges[0] is not self.spill:
                for part in ranges:
                    part.close()

    def stats(self, prefix: str, ranks: np.ndarray | None = None) -> tuple[dict[str, float], np.ndarray]:
        """``metrics.stats(prefix, column, weights)`` of the whole column, and the sorted column's
        values at the positions ``ranks`` (increasing)."""
        out = {f"{k}_{prefix}_ms": float("nan") for k in ("mean", "median", "p90", "p99")}
        ranks = np.asarray([] if ranks is None else ranks, dtype=np.int64)
        at = np.full(len(ranks), np.nan)
        if self.n == 0:
            return out, at
        total = float(self.total_weight)   # numpy's sum of integer-valued floats: exact below 2**53
        found: dict[str, float] = {}
        last = [np.nan]

        def products() -> Iterator[np.ndarray]:
            prefix_weight, position = 0, 0
            for values, weights in self.sorted_chunks():
                if weights is None:
                    cumulative = np.arange(prefix_weight + 1, prefix_weight + len(values) + 1, dtype=float)
                    product = values
                else:
                    running = np.cumsum(weights, dtype=np.int64)
                    running += prefix_weight
                    cumulative = running.astype(float)
                    product = values * weights.astype(float)
                prefix_weight = int(cumulative[-1])
                cumulative /= total
                for name, q in QUANTILES:
                    if name not in found:
                        i = int(np.searchsorted(cumulative, q))
                        if i < len(values):
                            found[name] = float(values[i] * 1e3)
                inside = (ranks >= position) & (ranks < position + len(values))
                at[inside] = values[ranks[inside] - position]
                position += len(values)
                last[0] = values[-1]
                yield product

        stream = products()
        mean = pairwise_sum(stream, self.n) / total
        for _ in stream:   # run it to its end (the ranges' files close there)
            pass
        out[f"mean_{prefix}_ms"] = float(mean * 1e3)
        for name, _ in QUANTILES:
            out[f"{name}_{prefix}_ms"] = found.get(name, float(last[0] * 1e3))
        return out, at

    def close(self) -> None:
        self.spill.close()
