"""Where independent evaluations run: this process, worker processes, or a Dask cluster.

Owns: ``Executor`` (the protocol), ``LocalExecutor``, ``DaskExecutor``, ``make_executor``.
Imports: errors (dask.distributed lazily, only when asked for).

The sweep and the mapping explorer hand their tasks to an executor; ``map`` returns the
results in submission order, so what a run computes never depends on where it ran.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Protocol

from rdusim.errors import ConfigError

#: ``progress(done, total)``: called as tasks finish
Progress = Callable[[int, int], None]


class Executor(Protocol):
    workers: int

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]],
            progress: Progress | None = None) -> list[Any]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Worker processes (``workers=1``: in this process)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool = ProcessPoolExecutor(self.workers, initializer=_worker_init) if self.workers > 1 else None

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]],
            progress: Progress | None = None) -> list[Any]:
        if self._pool is None:
            results = []
            for a in args:
                results.append(fn(*a))
                if progress:
                    progress(len(results), len(args))
            return results
        futures = [self._pool.submit(fn, *a) for a in args]
        try:
            for done, _ in enumerate(as_completed(futures), 1):
                if progress:
                    progress(done, len(futures))
            return [f.result() for f in futures]
        except BaseException:  # an error, Ctrl-C or SIGTERM: stop the workers now, not after their tasks
            self._stop()
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def _stop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())  # the pool's own workers, no others
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=5)


def _worker_init() -> None:
    """Workers ignore Ctrl-C (a terminal sends it to the whole process group): the parent
    handles it once and stops them, so no worker prints a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class DaskExecutor:
    """The same evaluations on a Dask distributed cluster (``tcp://host:8786``)."""

    def __init__(self, address: Any, timeout_s: float = 5.0) -> None:
        try:
            from distributed import Client  # noqa: PLC0415 (only when asked for)
        except ImportError:
            raise ConfigError("--dask: the 'distributed' package is not installed "
                              "(pip install 'dask[distributed]')") from None
        try:
            self._client = Client(address, timeout=f"{timeout_s}s")
        except Exception as error:  # noqa: BLE001 (a bad address, no answer, or a peer that is not a scheduler)
            raise ConfigError(f"--dask: cannot reach the Dask scheduler at {address!r} within {timeout_s:g} s "
                              f"({type(error).__name__}: {str(error)[:200]}); expected e.g. tcp://host:8786") from None
        self.workers = max(1, sum(self._client.nthreads().values()))

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]],
            progress: Progress | None = None) -> list[Any]:
        from distributed import as_completed as completed  # noqa: PLC0415 (only when asked for)

        futures = [self._client.submit(fn, *a, pure=False) for a in args]
        for done, _ in enumerate(completed(futures), 1):
            if progress:
                progress(done, len(futures))
        return list(self._client.gather(futures))

    def close(self) -> None:
        self._client.close()




def make_executor(workers: int | None = None, dask: str | None = None) -> Executor:
    """A Dask executor for a scheduler address, else local worker processes (``workers=1``:
    this process; default: every core)."""
    return DaskExecutor(dask) if dask else LocalExecutor(workers)
