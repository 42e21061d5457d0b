"""The DeepSeek-R1 production configurations against R5/R7, mechanism by mechanism
(docs/calibration.md, "Production configurations"). Prints markdown:

    python benchmarks/production_audit.py

For the high-speed mapping: the step's HBM roofline, the step the vendor figures imply, and
the step and per-user speed under every candidate mechanism the sources name or suggest (each
a what-if on the shipped mapping: one key changed, or a node variant). For the high-throughput
mapping: the aggregate against R7 over the batch and the same what-ifs. Nothing here is fitted.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rdusim.analysis.calibration.published import (
    DEEPSEEK_R1_HIGH_SPEED_TOKENS_PER_S_PER_USER,
    DEEPSEEK_R1_HIGH_THROUGHPUT_TOKENS_PER_S,
    DEEPSEEK_R1_TOKENS_PER_S_PER_USER,
)
from rdusim.analysis.metrics import step_figures
from rdusim.analysis.result import SimulationResult, simulate
from rdusim.model.speculative import accepted_tokens_per_step

ROOT = Path(__file__).resolve().parents[1]
SPEED = ROOT / "mappings/deepseek-r1/decode-high-speed.yaml"
THROUGHPUT = ROOT / "mappings/deepseek-r1/decode-high-throughput.yaml"
LLAMA = ROOT / "mappings/llama-3.1-8b/decode.yaml"
MLA = ("attn_norm, q_a_proj, q_a_norm, q_b_proj, kv_a_proj, kv_a_norm, rope, q_absorb, attention, v_absorb, o_proj")
SPLIT_LAYER = [  # the research deployment's two kernels per layer (methods.md section 1), heads-sharded
    f"layers.moe=[{{kernel: MLA, ops: [{MLA}, ffn_norm, router_gemm, router_topk], shard: {{q_a_proj: {{q_rank: 16}}, "
    "kv_a_proj: {kv_dim: 16}, attention: {heads: 16}}}, {kernel: FFN, ops: [moe_up, moe_act, moe_down, moe_combine]}]",
    "defaults.kernel_looping=false"]


def _node(topology: str, folder: Path, p2p_latency_us: float | None = None) -> Path:
    """A copy of the SN40L-16 node with another socket-to-socket topology or P2P latency
    (A.7: neither is public; the shipped values are labelled assumptions)."""
    socket = ROOT / "hw_configs/sn40l.yaml"
    if p2p_latency_us is not None:
        text = socket.read_text()
        assert 'latency: "2 us"' in text, "the shipped P2P latency moved: update this what-if"
        socket = folder / f"sn40l-{p2p_latency_us:g}us.yaml"
        socket.write_text(text.replace('latency: "2 us"', f'latency: "{p2p_latency_us:g} us"'))
    path = folder / f"sn40l-16-{topology}-{p2p_latency_us}.yaml"
    path.write_text(f"kind: node\nname: SN40L-16 ({topology})\nsocket: {socket}\n"
                    f"sockets: 16\nsockets_per_module: 2\ntopology: {topology}\n")
    return path


def _per_user(result: SimulationResult) -> float:
    spec = result.plan.mapping
    return step_figures("decode", result.total_s, batch=1, seq_len=spec.workload.seq_len,
                        accepted=accepted_tokens_per_step(spec))["tokens_per_s"]


def _row(label: str, source: str, result: SimulationResult, base: float) -> str:
    return (f"| {label} | {source} | {result.total_s * 1e3:.2f} | {result.total_s / base - 1:+.0%} "
            f"| {_per_user(result):.0f} |")


def high_speed(folder: Path) -> list[str]:
    base = simulate(SPEED, record_events=False)
    roofline = base.kernels["roofline_s"].sum()
    accepted = accepted_tokens_per_step(base.plan.mapping)
    lines = [f"High-speed mapping, batch 1, 8K: step {base.total_s * 1e3:.2f} ms, HBM roofline {roofline * 1e3:.2f} ms "
             f"({roofline / base.total_s:.0%}), {_per_user(base):.0f} tok/s/user ({accepted:g} token(s) per step). "
             f"R7's {DEEPSEEK_R1_HIGH_SPEED_TOKENS_PER_S_PER_USER:g} needs a "
             f"{accepted / DEEPSEEK_R1_HIGH_SPEED_TOKENS_PER_S_PER_USER * 1e3:.2f} ms step, R5's "
             f"{DEEPSEEK_R1_TOKENS_PER_S_PER_USER:g} a {accepted / DEEPSEEK_R1_TOKENS_PER_S_PER_USER * 1e3:.2f} ms step.", "",
             "| what-if | source | step ms | vs shipped | tok/s/user |", "|---|---|---:|---:|---:|",
             _row("shipped", "decode-high-speed.yaml", base, base.total_s)]
    cases = [
        ("no kernel looping (a launch and a node barrier per layer)", "R3", {"overrides": ["defaults.kernel_looping=false"]}),
        ("two kernels per layer (MLA, FFN), no looping", "methods.md s1 (research decode)", {"overrides": SPLIT_LAYER}),
        ("host-orchestrated calls (238.9 us each, fitted)", "R1 VI-A; calibration",
         {"overrides": ["defaults.orchestration=software"]}),
        ("host-orchestrated, two kernels per layer", "the research deployment's runtime",
         {"overrides": [*SPLIT_LAYER, "defaults.orchestration=software"]}),
        ("ring topology: a collective phase takes 15 latency steps", "A.7 [A] (topology not public)",
         {"hw": _node("ring", folder)}),
        *((f"P2P latency {us:g} us per collective step (shipped: 2 us)", "A.7 [A] (not public)",
           {"hw": _node("all_to_all", folder, us)}) for us in (4.0, 8.0)),
        ("every expert streamed each step (static graph)", "SnapStream paper (research deployment)",
         {"overrides": ["defaults.expert_weights=all"]}),
        ("all weights streamed from DDR (140 GB/s)", "R5: 'parameters reside in DDR'",
         {"overrides": ["defaults.weights=ddr"]}),
        ("attention keys split (flash-decoding)", "calibration.md, decode cost structure",
         {"overrides": ["defaults.attention_split=keys"]}),
        ("MTP as self-speculation, k = 1, acceptance 0.85 (draft pass not charged yet)",
         "M3 s5.4.3 (B.3): 2nd-token acceptance 85-90%",
         {"overrides": ["speculative={draft: mtp, k: 1, acceptance: {rate: 0.85, source: 'M3 s5.4.3'}}"]}),
        *((f"batch {b} (the model template's batch sizes)", "SambaStack DeepSeek-R1 template: 1, 2, 4, 8",
           {"batch": b}) for b in (2, 4, 8)),
    ]
    for label, source, kwargs in cases:
        lines.append(_row(label, source, simulate(SPEED, record_events=False, **kwargs), base.total_s))
    return lines


def llama_cross_check(folder: Path) -> list[str]:
    """The same what-ifs on the predicted Llama-3.1-8B row (R1 Table IV: 1042 tok/s/user, 16
    sockets, batch 1): an assumption that closes the DeepSeek gap must not open this one."""
    lines = ["| what-if on Llama-3.1-8B, TP16, batch 1 (R1 Table IV: 1042) | step ms | tok/s/user |", "|---|---:|---:|"]
    base = ["defaults.tp=16"]
    cases = [("shipped (R1 VI-B: one fused call per layer, hardware orchestration)", {"hw": ROOT / "hw_configs/sn40l-16.yaml"}),
             *((f"P2P latency {us:g} us", {"hw": _node("all_to_all", folder, us)}) for us in (4.0, 8.0)),
             ("host-orchestrated looped calls", {"hw": ROOT / "hw_configs/sn40l-16.yaml",
                                                  "overrides": ["defaults.orchestration=software",
                                                                "defaults.kernel_looping=true"]})]
    for label, kwargs in cases:
        kwargs = {"overrides": base + kwargs.pop("overrides", []), **kwargs}
        result = simulate(LLAMA, batch=1, record_events=False, **kwargs)
        lines.append(f"| {label} | {result.total_s * 1e3:.3f} | {_per_user(result):.0f} |")
    return lines


def high_throughput() -> list[str]:
    lines = ["| batch | step ms | tokens/s | vs R7 (4,500 at 256) | tok/s/user |", "|---:|---:|---:|---:|---:|"]
    for batch in (64, 128, 256):
        result = simulate(THROUGHPUT, batch=batch, record_events=False)
        aggregate = _per_user(result) * batch
        lines.append(f"| {batch} | {result.total_s * 1e3:.1f} | {aggregate:.0f} | "
                     f"{aggregate / DEEPSEEK_R1_HIGH_THROUGHPUT_TOKENS_PER_S - 1:+.0%} | {_per_user(result):.1f} |")
    lines += ["", "| what-if at 256 | step ms | tokens/s |", "|---|---:|---:|"]
    for label, overrides in (("host-orchestrated calls (the research deployment's runtime)", ["defaults.orchestration=software"]),
                             ("every expert streamed (static graph)", ["defaults.expert_weights=all"]),
                             ("attention keys split (flash-decoding)", ["defaults.attention_split=keys"])):
        result = simulate(THROUGHPUT, overrides=overrides, record_events=False)
        lines.append(f"| {label} | {result.total_s * 1e3:.1f} | {_per_user(result) * 256:.0f} |")
    return lines


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        print("\n".join(high_speed(Path(folder))))
        print()
        print("\n".join(llama_cross_check(Path(folder))))
    print()
    print("\n".join(high_throughput()))


if __name__ == "__main__":
    main()
