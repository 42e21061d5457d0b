"""A synthetic node with round numbers, for oracle tests that must not move with calibration.

The shipped ``hw_configs/sn40l.yaml`` is rewritten by ``rdusim calibrate``; tests whose
expected values are closed forms or exact event logs use this socket instead: 1 GFLOP/s on
both the matrix and the SIMD units, HBM 1 GB/s, DDR 0.1 GB/s, P2P 1 GB/s per direction with
1 us per transfer setup, launch 10 us (hardware) or 100 us (software), every efficiency 1,
and SRAM/HBM large enough that nothing is refused for capacity.

``write_node`` and ``write_mapping`` write YAML into a (temporary) folder and return the path,
so the code under test goes through its ordinary entry point, ``load_mapping``. ``random_kernels``
draws random spatial pipelines on this socket for the engines' property tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from rdusim.config.loader import model_path, read_document, validate
from rdusim.config.schema import ModelSpec
from rdusim.mapping.plan import KernelPlan, Stage

FLOP_PER_S = 1e9      # matrix and SIMD peak
HBM_BYTES_PER_S = 1e9
DDR_BYTES_PER_S = 1e8
P2P_BYTES_PER_S = 1e9
P2P_LATENCY_S = 1e-6
LAUNCH_HW_S = 10e-6
LAUNCH_SW_S = 100e-6
PCUS = 1000

SOCKET: dict[str, Any] = {
    "kind": "socket",
    "name": "synthetic",
    "compute": {"peak": "1 GFLOP/s", "simd_peak": "1 GFLOP/s", "pcus": PCUS, "pmus": PCUS, "tiles": 1,
                "clock": "1 GHz"},
    "memory": {
        "sram": {"capacity": "1 TiB", "bandwidth": "1 TB/s"},
        "hbm": {"capacity": "1 TiB", "bandwidth": "1 GB/s", "efficiency": 1.0},
        "ddr": {"capacity": "4 TiB", "bandwidth": "100 MB/s", "efficiency": 1.0},
    },
    "p2p": {"bandwidth": "1 GB/s", "latency": "1 us"},
    "kernel_launch": {"hardware": "10 us", "software": "100 us"},
    "efficiency": {"gemm": 1.0, "attention": 1.0, "elementwise": 1.0, "sort": 1.0, "collective": 1.0},
}


def write_node(folder: Path, sockets: int, topology: str = "all_to_all", **compute: Any) -> Path:
    """A node of ``sockets`` synthetic sockets; returns the node YAML's path.

    ``compute`` replaces entries of the socket's ``compute`` section (e.g. ``simd_peak``); the
    socket YAML is shared by every node of ``folder``, so give such a variant its own folder.
    """
    folder.mkdir(parents=True, exist_ok=True)
    socket = SOCKET | {"compute": SOCKET["compute"] | compute}
    (folder / "socket.yaml").write_text(yaml.safe_dump(socket, sort_keys=False))
    path = folder / f"node-{sockets}-{topology}.yaml"
    node = {"kind": "node", "name": f"synthetic-{sockets}", "socket": "socket.yaml", "sockets": sockets,
            "sockets_per_module": 1, "topology": topology}
    path.write_text(yaml.safe_dump(node, sort_keys=False))
    return path


def write_mapping(folder: Path, name: str, *, model: str, hardware: Path, phase: str,
                  layers: dict[str, list[dict[str, Any]]], workload: dict[str, Any],
                  defaults: dict[str, Any] | None = None, speculative: dict[str, Any] | None = None) -> Path:
    """A mapping YAML (model: a packaged name), with a ``speculative:`` block if given; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {"kind": "mapping", "name": name, "model": model, "hardware": str(hardware), "phase": phase,
            "workload": workload, "defaults": defaults or {}, "layers": layers}
    if speculative is not None:
        data["speculative"] = speculative
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# op names of one layer, as rdusim.model.transformer builds them (two kernels per layer type)
GQA_ATTENTION = ["attn_norm", "q_proj", "kv_proj", "rope", "attention", "o_proj"]
#: a model card with ``attention.qk_norm`` (Qwen3) adds its per-head norms before the rotary embedding
GQA_QK_NORM_ATTENTION = ["attn_norm", "q_proj", "kv_proj", "q_norm", "k_norm", "rope", "attention", "o_proj"]
MLA_PREFILL = ["attn_norm", "q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "kv_a_norm", "rope", "kv_b_proj",
               "attention", "o_proj"]
MLA_DECODE = ["attn_norm", "q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "kv_a_norm", "rope", "q_absorb",
              "attention", "v_absorb", "o_proj"]
DENSE_FFN = ["ffn_norm", "ffn_up", "ffn_act", "ffn_down", "residual_add"]
MOE_FFN = ["ffn_norm", "router_gemm", "router_topk", "moe_up", "moe_act", "moe_down", "moe_combine"]


def two_kernel_layers(model: str, phase: str) -> dict[str, list[dict[str, Any]]]:
    """Per layer type, an attention kernel and an FFN kernel covering every op."""
    if model == "deepseek-r1":
        attention = MLA_PREFILL if phase == "prefill" else MLA_DECODE
        return {"dense": [{"kernel": "Attention", "ops": attention}, {"kernel": "FFN", "ops": DENSE_FFN}],
                "moe": [{"kernel": "Attention", "ops": attention}, {"kernel": "FFN", "ops": MOE_FFN}]}
    attention = GQA_QK_NORM_ATTENTION if _qk_norm(model) else GQA_ATTENTION
    return {"dense": [{"kernel": "Attention", "ops": attention}, {"kernel": "FFN", "ops": DENSE_FFN}]}


def _qk_norm(model: str) -> bool:
    """Whether the packaged model card ``model`` sets ``attention.qk_norm`` (``ModelSpec.qk_norm``)."""
    return validate(read_document(model_path(model)), ModelSpec).qk_norm


@st.composite
def random_kernels(draw: st.DrawFn, chunk: st.SearchStrategy) -> tuple[KernelPlan, ...]:
    """One or two spatial kernels of one to three chained gemm stages on this socket's rate, each
    stage over the same number (1-4) of ``chunk``s; a later stage's loads may wait for its input
    (``loads_follow_inputs``) or it may be a barrier; buffer depth 1-3."""
    kernels = []
    for k in range(draw(st.integers(1, 2))):
        n_chunks = draw(st.integers(1, 4))
        stages = []
        for s in range(draw(st.integers(1, 3))):
            chunks = tuple(draw(st.lists(chunk, min_size=n_chunks, max_size=n_chunks)))
            inputs = (f"s{s - 1}",) if s else ()
            follow = bool(s) and draw(st.booleans())   # data-dependent loads: a chunk's loads wait for its inputs
            barrier = bool(s) and not follow and draw(st.booleans())
            stages.append(Stage(f"s{s}", "gemm", 1, FLOP_PER_S, inputs, chunks, is_barrier=barrier,
                                loads_follow_inputs=follow))
        kernels.append(KernelPlan(f"K{k}", "dense", tuple(stages), sram_bytes=0.0, chunk_tokens=1,
                                  weights_tier="hbm", buffer_depth=draw(st.integers(1, 3))))
    return tuple(kernels)
