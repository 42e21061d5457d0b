"""Load YAML documents into validated specs, with every problem located by file and line.

Owns: reading YAML, ``--set`` overrides, turning pydantic errors into ``ConfigError`` lines
(``file:line: key.path: what is wrong (did you mean ...?)``). Imports: schema, errors, yaml.
Nothing here writes files or changes global state.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rdusim.config.schema import (
    GpuMappingSpec,
    GpuNodeSpec,
    GpuSpec,
    MappingSpec,
    ModelSpec,
    NodeSpec,
    SocketSpec,
)
from rdusim.config.serving import ServingSpec
from rdusim.errors import ConfigError

MODELS_DIR = Path(__file__).parent / "models"
DOCUMENT_KINDS: dict[str, type[BaseModel]] = {
    "socket": SocketSpec,
    "node": NodeSpec,
    "model": ModelSpec,
    "mapping": MappingSpec,
    "gpu": GpuSpec,
    "gpu_node": GpuNodeSpec,
    "gpu_mapping": GpuMappingSpec,
    "serving": ServingSpec,
}
Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Document:
    """Raw YAML data plus the line of every key (1-based), for error messages."""

    path: Path
    data: Any
    lines: dict[Path_, int]


# ------------------------------------------------------------------------ raw YAML
#: libyaml's parser when pyyaml was built with it (same results, several times faster)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_document(path: str | Path) -> Document:
    """Parse a YAML file, recording the line of every key and item.

    Parsed files are cached by (path, size, modification time); callers never mutate the
    data (overrides work on a deep copy), so sweeps do not re-parse the same presets.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    stat = path.stat()
    return _read_cached(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _read_cached(path: Path, size: int, mtime_ns: int) -> Document:
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f"{mark.line + 1}" if mark is not None else "?"
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{path}:{line}: YAML syntax error: {problem}") from None
    lines: dict[Path_, int] = {}
    issues: list[str] = []
    if node is not None:
        _record_lines(node, (), lines, issues, path)
    if issues:
        raise ConfigError(issues)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping of keys at the top level")
    return Document(path=path, data=data, lines=lines)


def _record_lines(
    node: yaml.Node, at: Path_, lines: dict[Path_, int], issues: list[str], path: Path
) -> None:
    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                issues.append(
                    f"{path}:{key_node.start_mark.line + 1}: {_dotted(at + (key,))}: duplicate key"
                )
            seen.add(key)
            _record_lines(value_node, at + (key,), lines, issues, path)
            lines[at + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_lines(item, at + (index,), lines, issues, path)


# ------------------------------------------------------------------------ overrides
def apply_overrides(document: Document, overrides: list[str]) -> Document:
    """Apply ``a.b.c=value`` overrides to the raw data, before validation."""
    data = _deep_copy(document.data)
    lines = dict(document.lines)
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {override!r}: expected KEY.PATH=VALUE")
        parts: list[str | int] = [int(p) if p.isdigit() else p for p in key.strip().split(".")]
        target = data
        for depth, part in enumerate(parts[:-1]):
            target = _descend(target, part, parts[: depth + 1], override)
        value = yaml.safe_load(raw)
        last = parts[-1]
        if isinstance(target, list) and isinstance(last, int) and last < len(target):
            target[last] = value
        elif isinstance(target, dict):
            target[last] = value
        else:
            raise ConfigError(f"--set {override!r}: cannot set {key.strip()!r}")
        lines[tuple(parts)] = 0
    return Document(path=document.path, data=data, lines=lines)


def _descend(target: Any, part: str | int, prefix: list[str | int], override: str) -> Any:
    if isinstance(target, dict):
        return target.setdefault(part, {})
    if isinstance(target, list) and isinstance(part, int) and part < len(target):
        return target[part]
    raise ConfigError(f"--set {override!r}: {_dotted(tuple(prefix))} is not a mapping or list")


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


# ------------------------------------------------------------------------ validation
def validate(document: Document, spec_type: type[BaseModel]) -> Any:
    """Validate raw data against a spec type; raise one ConfigError listing every issue."""
    try:
        return spec_type.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError([_locate(document, spec_type, e) for e in error.errors()]) from None


def _locate(document: Document, spec_type: type[BaseModel], error: Any) -> str:
    loc = _data_path(document.data, error["loc"])
    line = _nearest_line(document.lines, loc)
    where = f"{document.path}:{line}" if line else f"{document.path} (--set)"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(spec_type, loc[:-1])
        message = f"unknown key {loc[-1]!r}"
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        message += f"; did you mean {close[0]!r}?" if close else f"; expected one of: {', '.join(allowed)}"
    elif error["type"] == "missing":
        message = "required key is missing"
    elif error["type"].endswith("_type") or error["type"].endswith("_parsing"):
        message = f"{message} (got {error.get('input')!r})"
    return f"{where}: {_dotted(loc) or '<top>'}: {message}"


def _data_path(data: Any, loc: tuple[Any, ...]) -> Path_:
    """Drop pydantic's union tags and validator names that are not keys of the YAML."""
    path: list[str | int] = []
    for index, part in enumerate(loc):
        is_last = index == len(loc) - 1
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        elif isinstance(data, dict) and not is_last:
            continue  # a discriminator tag such as 'mla' in ('attention', 'mla', 'heads')
        else:
            data = None
        path.append(part)
    return tuple(path)


def _nearest_line(lines: dict[Path_, int], loc: Path_) -> int:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


def _allowed_keys(spec_type: type[BaseModel], at: Path_) -> list[str]:
    current: Any = spec_type
    for part in at:
        current = _field_type(current, part)
        if current is None:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return []


def _field_type(current: Any, part: str | int) -> Any:
    """The type found one step down from ``current`` along a data path."""
    origin = typing.get_origin(current)
    if origin in (list, dict):
        return typing.get_args(current)[-1]
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(current) if isinstance(a, type)]
        models = [m for m in members if issubclass(m, BaseModel)]
        return _field_type(models[0], part) if models else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        for name, field in current.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
    return None


def _dotted(path: Path_) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


# ------------------------------------------------------------------------ documents
def load_spec(path: str | Path, spec_type: type[BaseModel], overrides: list[str] = ()) -> Any:
    """Read, override and validate one YAML document of a known type."""
    document = apply_overrides(read_document(path), list(overrides))
    return validate(document, spec_type)


def load_any(path: str | Path) -> BaseModel:
    """Validate a document of any kind, chosen by its ``kind`` key (for ``rdusim validate``)."""
    document = read_document(path)
    kind = document.data.get("kind")
    if kind not in DOCUMENT_KINDS:
        close = difflib.get_close_matches(str(kind), DOCUMENT_KINDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        line = document.lines.get(("kind",), 1)
        raise ConfigError(
            f"{document.path}:{line}: kind: expected one of {', '.join(DOCUMENT_KINDS)}, "
            f"got {kind!r}{hint}"
        )
    return validate(document, DOCUMENT_KINDS[kind])


def model_path(name_or_path: str, relative_to: Path | None = None) -> Path:
    """A model is a packaged name (``deepseek-r1``) or a YAML path."""
    packaged = MODELS_DIR / f"{name_or_path}.yaml"
    if packaged.is_file():
        return packaged
    candidate = Path(name_or_path)
    if relative_to is not None and not candidate.is_absolute():
        candidate = relative_to / candidate
    if candidate.suffix in (".yaml", ".yml"):
        return candidate
    known = sorted(p.stem for p in MODELS_DIR.glob("*.yaml"))
    close = difflib.get_close_matches(name_or_path, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown model {name_or_path!r}; known: {', '.join(known)}{hint}")


def dump_document(data: Any) -> str:
    """YAML text of raw document data, keys in the order given (the inverse of reading)."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
