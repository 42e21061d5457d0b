"""A mapping YAML with the model and hardware it names, loaded and validated as YAML.

Owns: ``LoadedMapping``, ``load_mapping``, ``validate_mapping``, ``resolve_kernels``, ``draft_model``, located
messages for cross-document errors (the model, hardware and companion prefill mapping a
mapping names; the model's context length). Imports: config, hw.

The resolve step: ``load_mapping`` folds the mapping's ``defaults`` into every kernel once,
so each ``KernelSpec`` of a loaded mapping carries its own TP/DP degrees, chunking, weights
tier and orchestration, and no code downstream asks "kernel setting, else mapping default".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rdusim.config.loader import (
    Document,
    Override,
    apply_overrides,
    model_path,
    read_document,
    validate,
)
from rdusim.config.schema import MTP_DRAFT, KernelSpec, MappingDefaultsSpec, MappingSpec, ModelSpec
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
        dotted = ""
        for part in path:
            dotted += f"[{part}]" if isinstance(part, int) else (f".{part}" if dotted else str(part))
        place = self.document.where(tuple(path))
        return f"{place}: {dotted}" if dotted else place


#: kernel settings that fall back to the mapping's ``defaults`` section
DEFAULTED_FIELDS: tuple[str, ...] = tuple(f for f in KernelSpec.model_fields if f in MappingDefaultsSpec.model_fields)


def validate_mapping(document: Document) -> MappingSpec:
    """A mapping document checked against the schema, with its kernels resolved."""
    return resolve_kernels(validate(document, MappingSpec))


def resolve_kernels(spec: MappingSpec) -> MappingSpec:
    """``spec`` with every kernel's unset settings taken from ``spec.defaults``."""
    layers = {layer_type: resolve_kernel_list(kernels, spec.defaults) for layer_type, kernels in spec.layers.items()}
    return spec.model_copy(update={"layers": layers})


def resolve_kernel_list(kernels: list[KernelSpec], defaults: MappingDefaultsSpec) -> list[KernelSpec]:
    """One layer type's kernels with their unset settings taken from ``defaults``."""
    return [k.model_copy(update={f: getattr(defaults, f) for f in DEFAULTED_FIELDS if getattr(k, f) is None})
            for k in kernels]


def load_mapping(path: str | Path, *, overrides: list[Override] | None = None, seq_len: int | None = None,
                 batch: int | None = None, hw: str | Path | None = None) -> LoadedMapping:
    """Load a mapping and everything it refers to. ``seq_len``/``batch`` are overrides too."""
    extra = list(overrides or [])
    if seq_len is not None:
        extra.append((f"--seq-len {seq_len}", f"workload.seq_len={seq_len}"))
    if batch is not None:
        extra.append((f"--batch {batch}", f"workload.batch={batch}"))
    if hw is not None:
        extra.append((f"--hw {hw}", f"hardware={Path(hw).absolute()}"))
    document = apply_overrides(read_document(path), extra)
    spec = validate_mapping(document)
    base = document.path.parent
    model_where = f"{document.where(('model',))}: model"
    model_file = model_path(spec.model, base, model_where)
    model = validate(read_document(model_file, model_where), ModelSpec)
    hw_path = Path(spec.hardware)
    hw_path = hw_path if hw_path.is_absolute() else base / hw_path
    system = load_system(hw_path, f"{document.where(('hardware',))}: hardware")
    loaded = LoadedMapping(spec, model, system, document)
    _check_context(loaded)
    if spec.prefill is not None:
        _check_prefill(loaded)
    check_speculative(loaded)
    return loaded


def _check_context(loaded: LoadedMapping) -> None:
    """A prompt longer than the model's trained context (max_position_embeddings) is refused."""
    limit = loaded.model.max_context
    for key, tokens in ((("workload", "seq_len"), loaded.spec.workload.seq_len),
                        (("deployment", "max_prompt"), loaded.spec.deployment.max_prompt)):
        if limit is not None and tokens is not None and tokens > limit:
            raise ConfigError(f"{loaded.where(*key)}: {tokens} tokens exceed {loaded.model.name}'s context "
                              f"of {limit} tokens (max_position_embeddings)")


def _check_prefill(loaded: LoadedMapping) -> None:
    """A decode mapping's ``prefill:`` must be a valid prefill mapping of the same model."""
    where = loaded.where("prefill")
    path = Path(os.path.normpath(loaded.document.path.absolute().parent / loaded.spec.prefill))
    if path == Path(os.path.normpath(loaded.document.path.absolute())):
        raise ConfigError(f"{where}: names this mapping itself; expected the prefill mapping that "
                          "shares the node")
    try:
        companion = load_mapping(path, seq_len=loaded.spec.workload.seq_len)
    except ConfigError as error:
        raise ConfigError([f"{where}: {loaded.spec.prefill!r} is not a valid mapping:", *error.issues]) from None
    if companion.spec.phase != "prefill":
        raise ConfigError(f"{where}: {loaded.spec.prefill!r} is a {companion.spec.phase} mapping; "
                          "expected a prefill mapping")
    if companion.model.name != loaded.model.name:
        raise ConfigError(f"{where}: {loaded.spec.prefill!r} maps {companion.model.name}, this mapping "
                          f"maps {loaded.model.name}")


def check_speculative(loaded: LoadedMapping) -> None:
    """A speculative mapping decodes, does not also set MTP tokens per step, and (when a separate
    model drafts) shares the target's vocabulary."""
    spec = loaded.spec
    sd = spec.speculative
    if sd is None:
        return
    if spec.phase != "decode":
        raise ConfigError(f"{loaded.where('speculative')}: speculative decoding applies to decode mappings "
                          f"(a draft proposes tokens, the target verifies them); this is a {spec.phase} mapping")
    if spec.workload.accepted_tokens_per_step != 1.0:
        raise ConfigError(f"{loaded.where('workload', 'accepted_tokens_per_step')}: "
                          "workload.accepted_tokens_per_step and speculative both set the tokens of a step; "
                          "keep speculative (it derives them from speculative.acceptance.rate and k)")
    if sd.draft == MTP_DRAFT:
        if loaded.model.mtp_layers == 0:
            raise ConfigError(f"{loaded.where('speculative', 'draft')}: draft 'mtp' drafts with the target's "
                              f"multi-token-prediction module, but {loaded.model.name} has mtp_layers: 0")
        return
    draft = draft_model(loaded)
    if draft.vocab != loaded.model.vocab:
        raise ConfigError(f"{loaded.where('speculative', 'draft')}: draft {draft.name} has a {draft.vocab}-token "
                          f"vocabulary, the target {loaded.model.name} {loaded.model.vocab}; a draft must share "
                          "the target's tokenizer")


def draft_model(loaded: LoadedMapping) -> ModelSpec:
    where = loaded.where("speculative", "draft")
    assert loaded.spec.speculative is not None
    path = model_path(loaded.spec.speculative.draft, loaded.document.path.parent, where)
    return validate(read_document(path, where), ModelSpec)
