"""Progress on long work, and what Ctrl-C or SIGTERM does: the one place for both.

Owns: ``bar`` (a tqdm progress bar on standard error, shown only on a terminal and never
under ``--quiet``), ``set_quiet``, ``ProgressExecutor`` (an executor whose ``map`` moves a
bar), ``Terminated`` and ``signals`` (SIGTERM raised as an exception, like Ctrl-C's
KeyboardInterrupt, so the command unwinds). Imports: tqdm.

Interruption: every command computes first and writes its outputs last, all together
(``rdusim.cli.output.Outputs.commit``: staged files beside their targets, then renamed with
the signals held back), so an interrupted command leaves the output paths exactly as they
were. ``rdusim.cli.main`` turns the interruption into one line and exit code 130 (SIGINT) or
143 (SIGTERM), the shell's 128 + signal number.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tqdm import tqdm

_QUIET = False


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress bars for the rest of this command."""
    global _QUIET  # noqa: PLW0603 (one command per process: the CLI sets it once)
    _QUIET = quiet


def shown() -> bool:
    """Bars are drawn only on a terminal (never into logs, pipes or tests) and not under --quiet."""
    return not _QUIET and sys.stderr.isatty()


def bar(total: float | None, desc: str, unit: str = "it", **options: Any) -> tqdm:
    """A progress bar on standard error, or a silent one (same methods) when not shown."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not shown(), dynamic_ncols=True,
                mininterval=0.5, leave=False, **options)


def updater(progress_bar: tqdm) -> Callable[[float, float], None]:
    """A ``progress(done, total)`` callback that moves ``progress_bar`` to ``done``."""

    def update(done: float, total: float) -> None:
        if progress_bar.total != total:
            progress_bar.total = total
        progress_bar.update(done - progress_bar.n)

    return update


class ProgressExecutor:
    """An executor (``rdusim.analysis.execution``) whose ``map`` moves ``progress_bar``."""

    def __init__(self, executor: Any, progress_bar: tqdm) -> None:
        self.executor = executor
        self.workers = executor.workers
        self.bar = progress_bar
        self.offset = 0

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]], progress: Any = None) -> list[Any]:
        start = self.offset

        def both(done: int, total: int) -> None:
            self.bar.update(start + done - self.bar.n)
            if progress is not None:
                progress(done, total)

        results = self.executor.map(fn, args, progress=both)
        self.offset = start + len(args)
        return results

    def close(self) -> None:
        self.executor.close()


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so the command unwinds as for Ctrl-C."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def signals() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` (and SIGINT ``KeyboardInterrupt``) while the command runs
    (handlers can only be set in the main thread; elsewhere the caller's stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for a short step that must not stop half-way (the
    renames that put a command's outputs in place); they arrive when it ends."""
    blocked = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
