"""A mapping YAML with the model and hardware it names, loaded and validated as YAML.

Owns: ``LoadedMapping``, ``load_mapping``, ``validate_mapping``, ``resolve_kernels``, located messages for
cross-document errors. Imports: config, hw.

The resolve step: ``load_mapping`` folds the mapping's ``defaults`` into every kernel once,
so each ``KernelSpec`` of a loaded mapping carries its own TP/DP degrees, chunking, weights
tier and orchestration, and no code downstream asks "kernel setting, else mapping default".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rdusim.config.loader import Document, apply_overrides, model_path, read_document, validate
from rdusim.config.schema import KernelSpec, MappingDefaultsSpec, MappingSpec, ModelSpec
from rdusim.errors import ConfigError
from rdusim.hw.system import System, load_system


@dataclass(frozen=True)
class LoadedMapping:
    spec: MappingSpec
    model: ModelSpec
    system: System
    document: Document

    def where(self, *path: str | int) -> str:
        """``file:line: dotted.key`` for a path in the mapping YAML (nearest known line)."""
        for end in range(len(path), -1, -1):
            line = self.document.lines.get(tuple(path[:end]))
            if line is not None:
                break
        dotted = ""
        for part in path:
            dotted += f"[{part}]" if isinstance(part, int) else (f".{part}" if dotted else str(part))
        place = f"{self.document.path}:{line}" if line else f"{self.document.path} (--set)"
        return f"{place}: {dotted}" if dotted else place


#: kernel settings that fall back to the mapping's ``defaults`` section
DEFAULTED_FIELDS: tuple[str, ...] = tuple(f for f in KernelSpec.model_fields if f in MappingDefaultsSpec.model_fields)


def validate_mapping(document: Document) -> MappingSpec:
    """A mapping document checked against the schema, with its kernels resolved."""
    return resolve_kernels(validate(document, MappingSpec))


def resolve_kernels(spec: MappingSpec) -> MappingSpec:
    """``spec`` with every kernel's unset settings taken from ``spec.defaults``."""
    defaults = spec.defaults
    layers = {layer_type: [k.model_copy(update={f: getattr(defaults, f) for f in DEFAULTED_FIELDS
                                                if getattr(k, f) is None}) for k in kernels]
              for layer_type, kernels in spec.layers.items()}
    return spec.model_copy(update={"layers": layers})


def load_mapping(path: str | Path, *, overrides: list[str] | None = None, seq_len: int | None = None,
                 batch: int | None = None, hw: str | Path | None = None) -> LoadedMapping:
    """Load a mapping and everything it refers to. ``seq_len``/``batch`` are overrides too."""
    extra = list(overrides or [])
    if seq_len is not None:
        extra.append(f"workload.seq_len={seq_len}")
    if batch is not None:
        extra.append(f"workload.batch={batch}")
    if hw is not None:
        extra.append(f"hardware={Path(hw).resolve()}")
    document = apply_overrides(read_document(path), extra)
    spec = validate_mapping(document)
    base = document.path.parent
    model_file = model_path(spec.model, base)
    if not model_file.is_file():
        raise ConfigError(f"{document.path}:{document.lines.get(('model',), 1)}: model: "
                          f"file {spec.model!r} not found")
    model = validate(read_document(model_file), ModelSpec)
    hw_path = Path(spec.hardware)
    hw_path = hw_path if hw_path.is_absolute() else base / hw_path
    if not hw_path.is_file():
        raise ConfigError(f"{document.path}:{document.lines.get(('hardware',), 1)}: hardware: "
                          f"file {spec.hardware!r} not found (looked in {hw_path})")
    return LoadedMapping(spec, model, load_system(hw_path), document)
