"""One decode workload on several hardware documents: SN40L nodes and GPU nodes side by side.

Owns: ``compare_hardware``. Imports: analysis.gpu, analysis.result (``simulate``),
point, mapping.capacity, config.

SN40L documents run the mapping itself (its kernels, its degrees) at the largest power-of-two
batch that fits HBM (``mapping.capacity.max_batch``). GPU documents run the mapping's model as
the library kernels of a PyTorch stack, CUDA-graph captured: one replica per GPU when the
weights fit, else tensor parallel over the smallest power of two of GPUs that holds them, with
an NCCL all-reduce after the attention output and the FFN down projection. A ``gpu_mapping``
document runs as written (the serving layout it cites: DP attention + EP experts + MTP for
DeepSeek-R1, TP8 for Llama-3.1-70B) at the compared prompt, policy and largest batch.
"""

from __future__ import annotations

from pathlib import Path

from rdusim.analysis.gpu.predict import (
    decoder_layer,
    kv_bytes_per_token,
    load_gpu_mapping,
    model_bytes,
    simulate_gpu_mapping,
    simulate_mla_step,
)
from rdusim.analysis.metrics import step_figures
from rdusim.config.loader import (
    Override,
    load_any,
    load_spec,
    model_path,
    read_document,
    yaml_value,
)
from rdusim.config.schema import (
    HBM,
    GpuMappingSpec,
    KvPolicySpec,
    MappingSpec,
    ModelSpec,
    WorkloadSpec,
)
from rdusim.errors import ConfigError
from rdusim.hw.gpu import GpuNode, load_gpu_node
from rdusim.kv_policy import COMPRESSING
from rdusim.mapping.gpu_mla import mla_kv_bytes_per_token, mla_weight_bytes
from rdusim.model.policy import kv_length
from rdusim.summation import add_in_order

MAX_GPU_BATCH = 1024  # largest batch tried on a GPU replica


def compare_hardware(mapping: str | Path, hws: list[str], *, seq_len: int, policies: list[str],
                     batch: int | None, compression: float) -> list[dict]:
    mapping = Path(mapping)
    spec = load_spec(mapping, MappingSpec)
    if spec.phase != "decode":
        raise ConfigError(f"{mapping}: compare-hw compares decode mappings, this one is {spec.phase}")
    model = load_spec(model_path(spec.model, mapping.parent), ModelSpec)
    rows = []
    for hw in hws:
        kind = read_document(Path(hw)).data.get("kind")
        for name in policies:
            policy = KvPolicySpec(name=name, compression=compression if name in COMPRESSING else 1.0)
            if kind == "gpu_mapping":
                rows.append(_gpu_mapping_row(model, hw, seq_len, policy, batch))
            elif kind in ("gpu", "gpu_node"):
                rows.append(_gpu_row(spec, model, hw, seq_len, policy, batch))
            else:
                load_any(hw)  # located errors for a bad document
                rows.append(_sn40l_row(mapping, hw, seq_len, policy, batch))
    return rows


def _sn40l_row(mapping: Path, hw: str, seq_len: int, policy: KvPolicySpec, batch: int | None) -> dict:
    from rdusim.analysis.result import simulate
    from rdusim.mapping.capacity import max_batch

    # each override labelled with the option that asked for it, so a message names that option
    compression = yaml_value(float(policy.compression))
    overrides: list[Override] = [(f"--policy {policy.name}", f"kv_policy.name={policy.name}"),
                                 (f"--compression {policy.compression:g}", f"kv_policy.compression={compression}")]
    admitted = load_spec(mapping, MappingSpec).deployment.max_prompt
    if admitted is not None and admitted < seq_len:  # the compared deployment admits the compared prompt
        overrides.append((f"--seq-len {seq_len}", f"deployment.max_prompt={seq_len}"))
    sized = overrides + [(f"--hw {hw}", f"hardware={Path(hw).resolve()}"),
                         (f"--seq-len {seq_len}", f"workload.seq_len={seq_len}")]
    largest, reason = max_batch(mapping, overrides=sized)
    use = batch or largest
    if use == 0:
        return _empty(hw, policy, reason)
    result = simulate(mapping, seq_len=seq_len, batch=use, hw=hw, overrides=overrides)
    memory = result.to_dict()["memory"]
    hbm = add_in_order(memory["per_socket"][HBM].values())
    accepted = result.accepted_tokens_per_step
    figures = step_figures("decode", result.total_s, batch=use, seq_len=seq_len, accepted=accepted)
    note = f"{result.plan.system.sockets} sockets, the mapping's degrees"
    if accepted > 1:
        note += f", MTP {accepted:g} tokens/step"
    return {"hardware": result.plan.system.name, "policy": policy.name, "batch": use, "max_batch": largest,
            "kv_len": result.plan.kv_len, "tpot_ms": figures["tpot_s"] * 1e3, "tokens_per_s": figures["tokens_per_s"],
            "hbm_gb_per_device": hbm / 1e9, "note": note}


def _gpu_row(spec: MappingSpec, model: ModelSpec, hw: str, seq_len: int, policy: KvPolicySpec,
             batch: int | None) -> dict:
    node = load_gpu_node(hw, "--hw")
    if model.attention.kind == "mla" and model.ffn.moe is not None:
        return _mla_row(model, node, seq_len, policy, batch)
    if model.attention.kind != "gqa" or model.ffn.moe is not None:
        return _empty(node.name, policy, "no GPU library kernels for this model", hardware=node.name)
    tp = 1
    while tp <= node.gpus and model_bytes(model) / tp + kv_bytes_per_token(model) * seq_len / tp > node.gpu.hbm_capacity_bytes:
        tp *= 2
    if tp > node.gpus:
        return _empty(node.name, policy, f"weights do not fit {node.gpus} x {node.gpu.name}", hardware=node.name)
    layer, head = decoder_layer(model), ["embedding", "lm_head"]
    if tp > 1:  # the all-reduces of a TP layer, and the vocabulary-split LM head's logits gathered
        layer.insert(layer.index("o_gemm") + 1, "all_reduce")
        layer.insert(layer.index("down_gemm") + 1, "all_reduce")
        head.append("logits_gather")
    gspec = GpuMappingSpec(kind="gpu_mapping", name=f"{model.name}-decode", model=model.name, hardware=hw,
                           phase="decode", launch="graph", tp=tp,
                           workload=WorkloadSpec(seq_len=seq_len, batch=1), kv_policy=policy,
                           layer=layer, head=head)
    probe = simulate_gpu_mapping(gspec, model, node, batch=1)
    largest = min(probe.max_batch, MAX_GPU_BATCH)
    use = batch or largest
    try:
        result = simulate_gpu_mapping(gspec, model, node, batch=use)
    except ConfigError as error:
        return _empty(node.name, policy, str(error).splitlines()[0], hardware=node.name)
    return {"hardware": node.name, "policy": policy.name, "batch": use * (node.gpus // tp),
            "max_batch": largest * (node.gpus // tp), "kv_len": result.kv_len,
            "tpot_ms": result.step.seconds * 1e3, "tokens_per_s": result.tokens_per_s,
            "hbm_gb_per_device": result.hbm_bytes / 1e9,
            "note": f"{node.gpus // tp} replica(s) x TP{tp}, PyTorch kernels, CUDA graph"}


def _gpu_mapping_row(model: ModelSpec, path: str, seq_len: int, policy: KvPolicySpec, batch: int | None) -> dict:
    """A ``gpu_mapping`` as written (its layout, launch mode, MTP) at the compared prompt and
    policy, at the largest batch that fits its node (or ``batch`` per replica)."""
    spec, gmodel, node = load_gpu_mapping(path, check_fit=False)
    if gmodel.name != model.name:
        raise ConfigError(f"{path}: model: {gmodel.name!r}, but the compared mapping runs {model.name!r}")
    if spec.phase != "decode":
        raise ConfigError(f"{path}: phase: compare-hw compares decode mappings, this one is {spec.phase}")
    try:  # a mapping whose node cannot hold one sequence is a row with the reason, not an error
        probe = simulate_gpu_mapping(spec, model, node, seq_len=seq_len, batch=1, policy=policy)
    except ConfigError as error:
        return _empty(node.name, policy, str(error).splitlines()[0], hardware=node.name)
    largest = min(probe.max_batch, MAX_GPU_BATCH)
    try:
        result = simulate_gpu_mapping(spec, model, node, seq_len=seq_len, batch=batch or largest, policy=policy)
    except ConfigError as error:
        return _empty(node.name, policy, str(error).splitlines()[0], hardware=node.name)
    replicas = node.gpus // spec.tp
    layout = (f"DP{spec.tp} attention + EP{spec.tp} experts" if result.attention == "dp"
              else f"{replicas} replica(s) x TP{spec.tp}")
    note = f"{spec.name}: {layout}, {spec.launch}"
    if result.accepted > 1:
        note += f", MTP {result.accepted:g} tokens/step"
    return {"hardware": node.name, "policy": policy.name, "batch": result.batch * replicas,
            "max_batch": largest * replicas, "kv_len": result.kv_len,
            "tpot_ms": result.step.seconds / result.accepted * 1e3,  # per output token, as step_figures
            "tokens_per_s": result.tokens_per_s, "hbm_gb_per_device": result.hbm_bytes / 1e9, "note": note}


def _mla_row(model: ModelSpec, node: GpuNode, seq_len: int, policy: KvPolicySpec, batch: int | None) -> dict:
    """An MLA + MoE model over the whole node: attention TP, routed experts EP (``gpu_mla``)."""
    tp = node.gpus
    weights = mla_weight_bytes(model, tp)
    per_seq = mla_kv_bytes_per_token(model) * kv_length(seq_len, policy)
    free = node.gpu.hbm_capacity_bytes - weights
    if free <= per_seq:
        return _empty(node.name, policy, f"weights {weights / 1e9:.0f} GB/GPU leave no room for one "
                      f"sequence on {node.gpus} x {node.gpu.name}", hardware=node.name)
    largest = min(int(free // per_seq), MAX_GPU_BATCH)
    use = batch or largest
    if use > largest:
        return _empty(node.name, policy, f"batch {use} does not fit (max {largest})", hardware=node.name)
    step = simulate_mla_step(model, node.gpu, batch=use, seq_len=seq_len, mode="graph", tp=tp, policy=policy)
    return {"hardware": node.name, "policy": policy.name, "batch": use, "max_batch": largest,
            "kv_len": kv_length(seq_len, policy), "tpot_ms": step.seconds * 1e3,
            "tokens_per_s": use / step.seconds, "hbm_gb_per_device": (weights + use * per_seq) / 1e9,
            "note": f"1 replica, attention TP{tp} + experts EP{tp}, CUDA graph, no MTP"}


def _empty(hw: str, policy: KvPolicySpec, reason: str, hardware: str | None = None) -> dict:
    return {"hardware": hardware or Path(hw).stem, "policy": policy.name, "batch": 0, "max_batch": 0,
            "kv_len": 0, "tpot_ms": float("nan"), "tokens_per_s": 0.0, "hbm_gb_per_device": 0.0,
            "note": reason}


