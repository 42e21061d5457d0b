"""The draft of a speculative decode mapping: its model, and its mapping on the target's node.

Owns: ``draft_candidates`` (the draft's loaded mapping, or the derived candidates to try).
Imports: bundle, config, errors, model. (The rules that span a target and its draft model are
``bundle.check_speculative``, run when a mapping loads.)

A decode mapping with ``speculative:`` names its draft model. With ``speculative.mapping`` the
draft runs that decode mapping, loaded on the target's node at the target's prompt length and
batch. Without it the draft's mapping is derived on the target's node: each decoder layer one
fused kernel call (R1 section VI-B), the target's per-step head kernels, the target's defaults
(chunking, orchestration, kernel looping) at the target's TP degree or, when that does not
divide the draft's dimensions (Llama-3.2-3B has 24 heads, 16 sockets), the largest divisor of it
that does; the draft is then replicated over the node's TP groups (each group drafts for its own
share of the work, so one socket's time is the step's). The derivation reads the target's
defaults, not how its layers are cut into kernels, so the mapping explorer's candidates share it.
"""

from __future__ import annotations

import os
from pathlib import Path

from rdusim.config.schema import MTP_DRAFT, KernelSpec, ModelSpec
from rdusim.errors import ConfigError
from rdusim.mapping.bundle import LoadedMapping, draft_model, load_mapping, resolve_kernels
from rdusim.model.policy import kv_length
from rdusim.model.transformer import HEAD, Shape, layer_graph


def draft_candidates(loaded: LoadedMapping) -> list[LoadedMapping]:
    """The draft's mapping (one, when ``speculative.mapping`` names it), else the derived ones to try
    in order: the target's TP degree, then each smaller divisor of it."""
    sd = loaded.spec.speculative
    assert sd is not None and sd.draft != MTP_DRAFT
    if sd.mapping is not None:
        return [_named_draft(loaded)]
    model = draft_model(loaded)
    tp = loaded.spec.defaults.tp
    degrees = [d for d in range(tp, 0, -1) if tp % d == 0]
    return [_derived_draft(loaded, model, d) for d in degrees]


def _named_draft(loaded: LoadedMapping) -> LoadedMapping:
    sd = loaded.spec.speculative
    assert sd is not None and sd.mapping is not None
    where = loaded.where("speculative", "mapping")
    path = Path(os.path.normpath(loaded.document.path.absolute().parent / sd.mapping))
    w = loaded.spec.workload
    try:
        draft = load_mapping(path, seq_len=w.seq_len, batch=w.batch, hw=loaded.system.source)
    except ConfigError as error:
        raise ConfigError([f"{where}: {sd.mapping!r} is not a valid draft mapping:", *error.issues]) from None
    if draft.spec.phase != "decode":
        raise ConfigError(f"{where}: {sd.mapping!r} is a {draft.spec.phase} mapping; expected a decode mapping")
    if draft.spec.speculative is not None:
        raise ConfigError(f"{where}: {sd.mapping!r} is itself speculative; a draft decodes plainly")
    if draft.model.name != draft_model(loaded).name:
        raise ConfigError(f"{where}: {sd.mapping!r} maps {draft.model.name}, but speculative.draft names "
                          f"{draft_model(loaded).name}")
    return draft


def _derived_draft(loaded: LoadedMapping, model: ModelSpec, tp: int) -> LoadedMapping:
    """The draft's mapping derived on the target's node: each decoder layer one fused kernel call
    (R1 section VI-B; R4 section 4.1, "embedding, looped decoders, classifier, sampling"), the
    target's per-step head kernels if it has them, and the target's defaults (chunking,
    orchestration, kernel looping) at TP ``tp``. It depends on the target's defaults only, not on
    how the target's own layers are cut into kernels."""
    spec = loaded.spec
    where = loaded.where("speculative", "draft")
    if model.ffn.moe is not None:
        raise ConfigError(f"{where}: draft {model.name} is a mixture-of-experts model; derived draft mappings "
                          "are for dense drafts: name its decode mapping in speculative.mapping")
    shape = Shape("decode", spec.workload.batch, 1, kv_length(spec.workload.seq_len, spec.kv_policy))
    ops = list(layer_graph(model, "dense", shape, spec.kv_policy).nodes)
    layers = {"dense": [KernelSpec(kernel="Decoder", ops=ops)]}
    if HEAD in spec.layers:
        layers[HEAD] = [KernelSpec(kernel=k.kernel, ops=k.ops) for k in spec.layers[HEAD]]
    derived = spec.model_copy(update={
        "name": f"{spec.name} draft ({model.name})", "model": model.name, "speculative": None, "prefill": None,
        "defaults": spec.defaults.model_copy(update={"tp": tp}), "layers": layers})
    return LoadedMapping(resolve_kernels(derived), model, loaded.system, loaded.document)
