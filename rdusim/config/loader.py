"""Load YAML documents into validated specs, with every problem located by file and line.

Owns: reading YAML, ``--set`` overrides, turning pydantic errors into ``ConfigError`` lines
(``file:line: key.path: what is wrong (did you mean ...?)``). Imports: schema, errors, yaml.
Nothing here writes files or changes global state.
"""

from __future__ import annotations

import difflib
import functools
import re
import stat
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rdusim.config.schema import (
    RETIRED_KEYS,
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
    #: keys set by an option rather than the file, and the option as typed (``--set 'a=1'``)
    origins: dict[Path_, str] = field(default_factory=dict)

    def where(self, path: Path_) -> str:
        """``file:line`` of a key path, or ``file (OPTION)`` when an option set it."""
        for end in range(len(path), -1, -1):  # a key under an overridden one came from the option
            if path[:end] in self.origins:
                return f"{self.path} ({self.origins[path[:end]]})"
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return f"{self.path}:{self.lines[path[:end]]}"
        return f"{self.path}:1"


# ------------------------------------------------------------------------ raw YAML
#: libyaml's parser when pyyaml was built with it (same results, several times faster)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: limits that keep a hostile or broken document from hanging or crashing the loader; the
#: shipped documents are under 10 levels deep, a few hundred values and a few KiB
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 100_000  # after alias expansion (a "billion laughs" expands to 10^9)


def read_text(path: str | Path, what: str = "", *, limit: int = MAX_DOCUMENT_BYTES,
              expected: str = "a YAML file") -> str:
    """The UTF-8 text of a regular file, or a ConfigError saying why it cannot be read.

    The one reader of every text input (YAML documents, request traces, prompt files).
    ``what`` names the option or key that gave the path (``--hw``, ``prefill``), if any.
    Directories, FIFOs and devices (``/dev/null``) are refused before opening, so a FIFO
    never blocks; the size is capped at ``limit`` bytes (``MAX_DOCUMENT_BYTES`` for a
    document); a leading byte-order mark (spreadsheet programs write one) is dropped;
    text that is not UTF-8 is refused at ``FILE:LINE`` of the first bad byte.
    """
    if not str(path).strip():
        raise ConfigError(f"{what + ': ' if what else ''}{str(path)!r}: an empty path; expected {expected}")
    path = Path(path)
    label = f"{what}: {path}" if what else str(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{label}: file not found") from None
    except OSError as error:
        raise ConfigError(f"{label}: cannot read ({error.strerror or error})") from None
    except ValueError:  # a NUL byte in the path
        raise ConfigError(f"{what or 'path'}: {str(path)!r} is not a valid path") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{label}: is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{label}: is not a regular file ({_file_type(info.st_mode)})")
    if info.st_size > limit:
        raise ConfigError(f"{label}: {info.st_size} bytes; the limit is {limit} ({expected})")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as error:
        raise ConfigError(f"{label}: cannot read ({error.strerror or error})") from None
    if len(raw) > limit:  # the file grew while it was read
        raise ConfigError(f"{label}: more than {limit} bytes; the limit is {limit} ({expected})")
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise ConfigError(f"{label}:{line}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset "
                          f"{error.start})") from None


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def read_document(path: str | Path, what: str = "") -> Document:
    """Parse a YAML file, recording the line of every key and item.

    Parsed files are cached by (path, size, modification time); callers never mutate the
    data (overrides work on a deep copy), so sweeps do not re-parse the same presets.
    """
    text = read_text(path, what)  # every check, even when cached: the file may have changed kind
    path = Path(path)
    stat_ = path.stat()
    return _read_cached(path, stat_.st_size, stat_.st_mtime_ns, text)


@functools.lru_cache(maxsize=256)
def _read_cached(path: Path, size: int, mtime_ns: int, text: str) -> Document:
    data, lines = parse_yaml(text, str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping of keys at the top level, got {_kind(data)}")
    return Document(path=path, data=data, lines=lines)


def parse_yaml(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    """Parse one YAML document safely: the data and the line of every key and item.

    Bounded: nesting deeper than ``MAX_DEPTH``, more than ``MAX_VALUES`` values once aliases
    are expanded, a recursive alias, duplicate keys and keys that are not text are all
    ConfigErrors located at ``source:line``. Only the safe YAML tags are constructed.
    """
    try:
        _check_depth(text, source)
        node = yaml.compose(text, Loader=_LOADER)
        if node is None:
            return None, {}
        lines: dict[Path_, int] = {}
        _record_lines(node, lines, source)
        data = _LOADER("").construct_document(node)
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}:{_error_line(error, text)}: YAML syntax error: {_problem(error)}") from None
    return data, lines


def _check_depth(text: str, source: str) -> None:
    """Stop at the first collection nested deeper than MAX_DEPTH (libyaml's composer recurses)."""
    def too_deep(line: int) -> ConfigError:
        return ConfigError(f"{source}:{line}: nested more than {MAX_DEPTH} levels deep")

    depth = 0
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise too_deep(event.start_mark.line + 1)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as error:
        # libyaml >= 0.2.5 has its own nesting limit, hit by the scanner (which reads ahead of
        # the events above) on a long run of flow brackets: the same failure, so the same message
        if "maximum nesting depth" in str(error):
            raise too_deep(_error_line(error, text)) from None
        raise


def _record_lines(root: yaml.Node, lines: dict[Path_, int], source: str) -> None:
    """Walk the node graph without recursion, expanding aliases, within MAX_VALUES."""
    issues: list[str] = []
    stack: list[tuple[yaml.Node, Path_, frozenset[int]]] = [(root, (), frozenset())]
    visited = 0
    while stack:
        node, at, parents = stack.pop()
        visited += 1
        line = node.start_mark.line + 1
        if visited > MAX_VALUES:
            raise ConfigError(f"{source}:{line}: more than {MAX_VALUES} values once aliases are expanded "
                              "(an alias bomb?)")
        if id(node) in parents:
            raise ConfigError(f"{source}:{line}: {_dotted(at) or '<top>'}: recursive alias (a value that "
                              "contains itself)")
        lines.setdefault(at, line)
        inside = parents | {id(node)}
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                    shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else _kind_of_node(key_node)
                    issues.append(f"{source}:{key_line}: {_dotted(at) or '<top>'}: key {shown!r} is not a "
                                  "name (write keys as text; quote it if it looks like a number, bool or null)")
                    continue
                key = key_node.value
                if key in seen:
                    issues.append(f"{source}:{key_line}: {_dotted(at + (key,))}: duplicate key")
                seen.add(key)
                lines[at + (key,)] = key_line
                stack.append((value_node, at + (key,), inside))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                stack.append((item, at + (index,), inside))
    if issues:
        raise ConfigError(sorted(set(issues), key=issues.index))


def _kind_of_node(node: yaml.Node) -> str:
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"


def _kind(data: Any) -> str:
    if data is None:
        return "an empty document"
    return {dict: "a mapping", list: "a list"}.get(type(data), f"the {type(data).__name__} {data!r}")


def _error_line(error: yaml.YAMLError, text: str) -> int:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is not None:
        return mark.line + 1
    position = getattr(error, "position", None)  # a ReaderError: a character YAML does not allow
    return text.count("\n", 0, position) + 1 if isinstance(position, int) else 1


def _problem(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.reader.ReaderError):
        character = chr(error.character) if isinstance(error.character, int) else error.character
        return f"character {character!r} is not allowed ({error.reason})"
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    return f"{problem} ({context})" if context else problem


# ------------------------------------------------------------------------ overrides
Override = str | tuple[str, str]  # "KEY.PATH=VALUE", or (the option that gave it, "KEY.PATH=VALUE")


def apply_overrides(document: Document, overrides: list[Override]) -> Document:
    """Apply ``a.b.c=value`` overrides to the raw data, before validation.

    Each value is parsed by the same bounded YAML loader as files. An override is either a
    ``--set`` string or ``(label, "key=value")`` where ``label`` is what the user typed
    (``--seq-len 4096``); errors in overridden keys are reported against that label.
    """
    data = _deep_copy(document.data)
    origins = dict(document.origins)
    for override in overrides:
        label, text = override if isinstance(override, tuple) else (f"--set {override!r}", override)
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{label}: expected KEY.PATH=VALUE")
        parts: list[str | int] = [int(p) if p.isdigit() else p for p in key.strip().split(".")]
        if any(p == "" for p in parts):
            raise ConfigError(f"{label}: {key.strip()!r} has an empty key between dots")
        try:
            value, _ = parse_yaml(raw, "VALUE")
        except ConfigError as error:
            detail = "; ".join(re.sub(r"^VALUE:\d+: (YAML syntax error: )?", "", i) for i in error.issues)
            raise ConfigError(f"{label}: VALUE is not valid YAML: {detail}") from None
        target = data
        for depth, part in enumerate(parts[:-1]):
            target = _descend(target, part, parts[: depth + 1], label)
        last = parts[-1]
        if isinstance(target, list) and isinstance(last, int) and last < len(target):
            target[last] = value
        elif isinstance(target, dict):
            target[last] = value
        else:
            raise ConfigError(f"{label}: cannot set {key.strip()!r}")
        path = tuple(parts)
        origins = {k: v for k, v in origins.items() if k[: len(path)] != path}
        origins[path] = label
    return Document(path=document.path, data=data, lines=document.lines, origins=origins)


def _descend(target: Any, part: str | int, prefix: list[str | int], label: str) -> Any:
    if isinstance(target, dict):
        return target.setdefault(part, {})
    if isinstance(target, list) and isinstance(part, int) and part < len(target):
        return target[part]
    raise ConfigError(f"{label}: {_dotted(tuple(prefix))} is not a mapping or list")


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


# ------------------------------------------------------------------------ validation
def validate(document: Document, spec_type: type[BaseModel]) -> Any:
    """Validate raw data against a spec type; raise one ConfigError listing every issue.

    A document of another known kind (a ``gpu_mapping`` where a ``mapping`` is expected) is
    one line at its ``kind`` key, not a page of schema errors.
    """
    expected = _kind_of_spec(spec_type)
    kind = document.data.get("kind") if isinstance(document.data, dict) else None
    if expected is not None and isinstance(kind, str) and kind in DOCUMENT_KINDS and kind != expected:
        raise ConfigError(f"{document.where(('kind',))}: kind: expected a document of kind {expected!r} here, "
                          f"this one is {kind!r}")
    try:
        return spec_type.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError([_locate(document, spec_type, e) for e in error.errors()]) from None


def _kind_of_spec(spec_type: type[BaseModel]) -> str | None:
    """The ``kind`` a spec type's documents declare (``kind: Literal["mapping"]``), if any."""
    field = spec_type.model_fields.get("kind")
    values = typing.get_args(field.annotation) if field is not None else ()
    return values[0] if len(values) == 1 and isinstance(values[0], str) else None


def check_kind(path: str | Path, kinds: tuple[str, ...], what: str, hint: str = "", given_by: str = "") -> str:
    """The ``kind`` of the document at ``path`` when it is one of ``kinds``, else one located
    line saying what ``what`` (an argument or option) takes, and ``hint`` (where it goes).
    ``given_by`` (an option, or the key that named the path) prefixes a file that cannot be read."""
    document = read_document(path, given_by)
    kind = document.data.get("kind")
    if kind not in kinds:
        names = " or ".join(repr(k) for k in kinds)
        raise ConfigError(f"{document.where(('kind',))}: kind: {what} takes a document of kind {names}, "
                          f"this one is {kind!r}" + (f"; {hint}" if hint else ""))
    return kind


def _locate(document: Document, spec_type: type[BaseModel], error: Any) -> str:
    loc = _data_path(document.data, error["loc"])
    where = document.where(loc)
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden" and loc[-1] in RETIRED_KEYS:
        message = f"key {loc[-1]!r} is {RETIRED_KEYS[loc[-1]]}"
    elif error["type"] == "extra_forbidden":
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


def _allowed_keys(spec_type: type[BaseModel], at: Path_) -> list[str]:
    current: Any = spec_type
    for part in at:
        current = _field_type(current, part)
        if current is None:
            return []
    if typing.get_origin(current) in (typing.Union, types.UnionType):  # an optional section
        current = next((m for m in typing.get_args(current) if isinstance(m, type) and issubclass(m, BaseModel)), None)
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
    if not isinstance(kind, str) or kind not in DOCUMENT_KINDS:
        close = difflib.get_close_matches(str(kind), DOCUMENT_KINDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        line = document.lines.get(("kind",), 1)
        raise ConfigError(
            f"{document.path}:{line}: kind: expected one of {', '.join(DOCUMENT_KINDS)}, "
            f"got {kind!r}{hint}"
        )
    return validate(document, DOCUMENT_KINDS[kind])


def model_path(name_or_path: str, relative_to: Path | None = None, where: str = "") -> Path:
    """A model is a packaged name (``deepseek-r1``) or a YAML path; ``where`` locates the key."""
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
    prefix = f"{where}: " if where else ""
    raise ConfigError(f"{prefix}unknown model {name_or_path!r}; known: {', '.join(known)}{hint} "
                      "(or a path ending in .yaml)")


def yaml_value(value: Any) -> str:
    """``value`` as YAML text for an override's right-hand side (``1e300`` is ``1.0e+300``:
    Python's ``1e+300`` would read back as text)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("...").strip()


def dump_document(data: Any) -> str:
    """YAML text of raw document data, keys in the order given (the inverse of reading)."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
