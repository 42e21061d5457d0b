"""Writing results: every output path checked before any work, all of a command's outputs
committed together or not at all, and the human-readable table.

Owns: ``Outputs`` (the one place that validates and writes output paths), ``write_atomic``
(one file), ``format_table``.
Imports: analysis results, errors, units, summation.

The contract: a command registers each output (``--out``, ``--trace``, ``--plot``, an output
folder) before it computes anything, so a bad path costs nothing; after the work it hands
over the contents and ``commit`` writes each to a temporary file beside its target and only
then renames them all into place (``os.replace``). A failure before the renames leaves
nothing behind. Files get the permissions the umask gives (like any other tool); a symbolic
link, FIFO, device, folder or read-only file at an output path is refused, never replaced.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rdusim.analysis.result import SimulationResult
from rdusim.cli.progress import held
from rdusim.errors import ConfigError
from rdusim.summation import add_in_order
from rdusim.units import format_bytes

#: kernel pseudo-filesystems: writing there is never a result file
_PSEUDO = (Path("/proc"), Path("/sys"), Path("/dev"))


@dataclass
class _Folder:
    option: str
    path: Path
    stale: str  # glob of files from an earlier run that this one replaces (e.g. "top-*.yaml")


@dataclass
class Outputs:
    """The files one command writes: registered (and checked) first, committed together."""

    _files: dict[Path, str] = field(default_factory=dict)          # path -> option that named it
    _folders: dict[Path, _Folder] = field(default_factory=dict)
    _content: dict[Path, bytes | Iterable[str | bytes]] = field(default_factory=dict)
    _streams: dict[Path, tuple[str, IO[str]]] = field(default_factory=dict)   # path -> (temporary file, handle)

    def file(self, option: str, path: str | Path | None) -> Path | None:
        """Check an output file path now (``None``: the option was not given)."""
        if path is None:
            return None
        target = _check_file(option, path)
        self._claim(option, target)
        self._files[target] = option
        return target

    def folder(self, option: str, path: str | Path | None, stale: str = "") -> Path | None:
        """Check an output folder now; it is created at commit time, never before."""
        if path is None:
            return None
        target = _check_folder(option, path)
        self._claim(option, target)
        self._folders[target] = _Folder(option, target, stale)
        return target

    def put(self, path: Path, content: str | bytes | Iterable[str | bytes]) -> None:
        """Hand over the content of a registered file, or of a file inside a registered folder;
        an iterable of chunks is written chunk by chunk at commit (a large CSV never whole in memory)."""
        if path not in self._files and path.parent not in self._folders:
            raise RuntimeError(f"{path} was not registered as an output")
        self._content[path] = content.encode("utf-8") if isinstance(content, str) else content

    def stream(self, path: Path) -> IO[str]:
        """A registered file written while the command works: a text handle on a temporary file
        beside it (in its folder's nearest existing ancestor while the folder is not yet created),
        renamed into place at ``commit`` with the others; ``abort`` removes it."""
        if path not in self._files and path.parent not in self._folders:
            raise RuntimeError(f"{path} was not registered as an output")
        folder = path.parent if str(path.parent) else Path(".")
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        tmp, handle = _temporary(folder, path.name, "w", encoding="utf-8", newline="")
        self._streams[path] = (tmp, handle)
        return handle

    def abort(self) -> None:
        """Remove the files being streamed (nothing else was written yet)."""
        for tmp, handle in self._streams.values():
            handle.close()
            Path(tmp).unlink(missing_ok=True)
        self._streams.clear()

    def commit(self) -> list[Path]:
        """Write every file handed over, all or nothing; returns the paths written."""
        created = [f.path for f in self._folders.values() if not f.path.exists()]
        staged: list[tuple[str, Path]] = []
        try:
            for _, handle in self._streams.values():
                handle.close()
            for folder in created:
                folder.mkdir(parents=True)
            for path, data in self._content.items():
                staged.append((_stage(path, data), path))
            staged += [(tmp, path) for path, (tmp, _) in self._streams.items()]
            self._streams.clear()
        except BaseException as error:
            for tmp, _ in staged:
                Path(tmp).unlink(missing_ok=True)
            self.abort()
            for folder in reversed(created):
                _remove_empty(folder)
            if not isinstance(error, OSError):
                raise
            raise ConfigError(f"{self._option_of(error)}: cannot write {error.filename or ''}: "
                              f"{error.strerror or error}") from None
        with held():  # a signal now would leave some outputs new and others old: it waits
            for tmp, path in staged:
                os.replace(tmp, path)
            for folder in self._folders.values():
                _remove_stale(folder, {path for _, path in staged})
        return [path for _, path in staged]

    def discard(self) -> None:
        """Forget the contents (nothing was written; nothing to undo)."""
        self._content.clear()

    def _claim(self, option: str, target: Path) -> None:
        others = {**self._files, **{p: f.option for p, f in self._folders.items()}}
        if target in others:
            raise ConfigError(f"{option}: {target} is also the output of {others[target]}")

    def _option_of(self, error: OSError) -> str:
        name = Path(error.filename) if error.filename else None
        for path, option in self._files.items():
            if name is not None and name.parent == path.parent:
                return option
        return next(iter({**self._files, **{p: f.option for p, f in self._folders.items()}}.values()), "output")


def _check_path_text(option: str, path: str | Path, kind: str) -> None:
    if not str(path).strip():
        raise ConfigError(f"{option}: expected a {kind} path, got an empty string")
    if "\x00" in str(path):
        raise ConfigError(f"{option}: {str(path)!r} is not a valid path (it contains a NUL byte)")


def write_atomic(path: str | Path, text: str, option: str = "output") -> None:
    """One file on its own, checked and written atomically (``Outputs`` for several)."""
    outputs = Outputs()
    target = outputs.file(option, path)
    outputs.put(target, text)
    outputs.commit()


def _check_file(option: str, path: str | Path) -> Path:
    _check_path_text(option, path, "file")
    target = Path(path)
    where = f"{option}: {target}"
    _refuse_special(where, target)
    if target.exists() or target.is_symlink():
        info = target.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise ConfigError(f"{where}: is a symbolic link; give the file it points to "
                              f"({os.path.realpath(target)}) if that is what you mean")
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{where}: is a folder; give a file path inside it")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{where}: exists and is not a regular file (a FIFO, socket or device)")
        if not info.st_mode & 0o222 or not os.access(target, os.W_OK):
            raise ConfigError(f"{where}: is read-only; remove it or choose another path")
    _check_writable_folder(where, target.parent)
    return target


def _check_folder(option: str, path: str | Path) -> Path:
    _check_path_text(option, path, "folder")
    target = Path(path)
    where = f"{option}: {target}"
    _refuse_special(where, target)
    if target.is_symlink() and not target.is_dir():
        raise ConfigError(f"{where}: is a symbolic link that does not lead to a folder")
    if target.exists():
        if not target.is_dir():
            raise ConfigError(f"{where}: exists and is not a folder")
        _check_writable_folder(where, target)
        return target
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    _check_writable_folder(where, ancestor)
    return target


def _refuse_special(where: str, target: Path) -> None:
    real = Path(os.path.realpath(target))
    for pseudo in _PSEUDO:
        if real == pseudo or pseudo in real.parents:
            raise ConfigError(f"{where}: is under {pseudo}, a kernel pseudo-filesystem, not a place for results")


def _check_writable_folder(where: str, folder: Path) -> None:
    """The folder exists, is a folder, and a file can be created in it (tried, then removed)."""
    folder = folder if str(folder) else Path(".")
    if not folder.exists():
        ancestor = folder
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if ancestor.exists() and not ancestor.is_dir():
            raise ConfigError(f"{where}: {ancestor} is a file, not a folder")
        raise ConfigError(f"{where}: folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise ConfigError(f"{where}: {folder} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".rdusim-probe.", suffix=".tmp")
    except OSError as error:
        raise ConfigError(f"{where}: cannot create files in {folder} ({error.strerror or error})") from None
    os.close(fd)
    os.unlink(probe)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temporary(folder: Path, name: str, mode: str, **options: Any) -> tuple[str, IO[Any]]:
    """A new temporary file in ``folder`` for the output ``name``, with the umask's permissions,
    open in ``mode``: its path and handle (nothing left behind if it cannot be opened)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        return tmp, os.fdopen(fd, mode, **options)
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise


def _stage(path: Path, data: bytes | Iterable[str | bytes]) -> str:
    """Write ``data`` (bytes, or chunks of text or bytes) to a temporary file beside ``path``."""
    tmp, handle = _temporary(path.parent, path.name, "wb")
    try:
        with handle:
            for chunk in [data] if isinstance(data, bytes | bytearray | memoryview) else data:
                handle.write(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _remove_stale(folder: _Folder, written: set[Path]) -> None:
    if not folder.stale:
        return
    for old in folder.path.iterdir():
        if fnmatch.fnmatch(old.name, folder.stale) and old not in written and old.is_file():
            old.unlink()


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def _speculative_lines(result: SimulationResult) -> list[str]:
    """Under speculative decoding: the step's draft/verify split and the tokens it yields."""
    sd = result.plan.mapping.speculative
    if sd is None:
        return []
    split = result.speculative_split()
    return [f"speculative: draft {sd.draft}, k={sd.k}, acceptance rate {sd.acceptance.rate:g} "
            f"({sd.acceptance.source})",
            f"  draft {split['draft_s'] * 1e3:.3f} ms ({sd.k} steps) + verify {split['verify_s'] * 1e3:.3f} ms "
            f"({sd.k + 1} tokens per sequence); accepted tokens per step {result.accepted_tokens_per_step:.3f}; "
            f"{result.tokens_per_s_per_user:.1f} tok/s/user, {result.tokens_per_s:.1f} tok/s in all"]


def format_table(result: SimulationResult) -> str:
    plan = result.plan
    spec = plan.mapping
    width = max([6, *(len(t) for t in result.kernels["layer_type"])])
    lines = [
        f"{spec.name}: {plan.model.name} {plan.phase} on {plan.system.name} "
        f"({plan.system.sockets} sockets), seq_len={plan.seq_len}, batch={plan.batch}, "
        f"kv_policy={spec.kv_policy.name} (kv_len={plan.kv_len})", "",
        f"{'kernel':<24} {'layer':<{width}} {'calls':>5} {'latency ms':>11} {'share':>7} {'compute ms':>11} "
        f"{'memory ms':>10} {'comm ms':>9} {'bound':<8} {'PCU%':>5} {'HBM%':>5}",
    ]
    for row in result.kernels.itertuples():
        lines.append(
            f"{row.kernel:<24} {row.layer_type:<{width}} {row.calls:>5} {row.latency_s * 1e3:>11.3f} "
            f"{row.share * 100:>6.2f}% {row.compute_s * 1e3:>11.3f} {row.memory_s * 1e3:>10.3f} "
            f"{row.comm_s * 1e3:>9.3f} {row.bound:<8} {row.pcu_util * 100:>5.1f} {row.hbm_util * 100:>5.1f}")
    label = "time to first token" if plan.phase == "prefill" else "decode step"
    lines += ["", f"{label}: {result.total_s * 1e3:.3f} ms  (share = fraction of its layer type's time)"]
    lines += _speculative_lines(result)
    lines += ["", "memory per socket (each of the symmetric sockets):"]
    for tier, uses in result.memory.items():
        used = {u: b for u, b in uses.items() if b > 0}
        if used:
            capacity = plan.system.socket.capacity_bytes(tier)
            parts = ", ".join(f"{u} {format_bytes(b)}" for u, b in used.items())
            lines.append(f"  {tier.upper():<4} {format_bytes(add_in_order(used.values())):>11} of {format_bytes(capacity)}: {parts}")
    return "\n".join(lines) + "\n"
