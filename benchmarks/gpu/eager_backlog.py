"""What an eager op costs the host by the GPU's backlog and by the host's own state (run dq, issue 17 item 4).

The engine prices an eager op at its kind's measured host cost, the "idle" cost while at most one
kernel is unfinished and the "behind" cost with a longer backlog (``rdusim.sim.gpu._host``). Both
costs come from ``sweep.py``'s loop microbenchmark: ``behind`` times a loop with a sleep kernel
queued first; ``idle`` times a loop *right after a synchronize that waited out that sleep* and
includes the loop's tail. Which of the two a step pays was an assumption ([A], docs/gpu.md "The GPU
side of an eager step"): nothing measured the host with a short backlog, and nothing separated the
GPU's state from the host's (a CPU that has just waited in ``cudaStreamSynchronize``). This script
times every call on its own (``perf_counter_ns`` around it), so each call's backlog is known:

- ``positions``: ``view`` (no kernel: a control), ``elementwise_add``, ``rms_norm`` and ``gemm`` with
  ``sweep.dispatch_rows``'s operands, 40 calls a trial, 30 trials, in four states: ``idle_hot`` (a
  synchronize, then 1 ms of host spinning, then the calls: every kernel done before the next call),
  ``behind_hot`` (the same with a 4 ms sleep kernel queued before the spin: call j finds j + 1
  kernels unfinished), ``idle_waited`` (a 20 ms sleep waited out by a synchronize just before, as
  ``dispatch``'s idle loop is) and ``behind_waited`` (the same, then a 4 ms sleep queued);
- ``crossing``: 200 ``torch.add(a, b)`` calls back to back from an idle GPU at tensor sizes whose kernel
  spans 2-40 us, so the host and the GPU trade the lead; host seconds a call (before the
  synchronize), wall seconds a call (after it) and GPU seconds a call (the same calls queued
  behind a sleep, CUDA events around them);
- ``sequence``: one Llama-3.1-8B decode layer's 36 calls with the forward's operands
  (``sweep.layer_sites``), in forward order over 16 layers, every call timed, in the four states,
  at batch 1 x 2048 and 64 x 1024 keys; beside it the same sites timed in loops of 10 as the paired
  runs did (``sweep._site_pass``, behind and idle) and the eager step (host issue and wall, from an
  idle GPU), interleaved trial by trial;
- ``dispatch``: ``sweep.dispatch_rows`` itself (the documents' method on this host).

Measure (one H200, about two minutes)::

    python benchmarks/gpu/eager_backlog.py --out dq.csv.gz --rows dq-rows.csv

Analyse (CPU; the registered checks of ``h200-20261201dq-backlog-hypotheses.md``)::

    python benchmarks/gpu/eager_backlog.py --analyse dq.csv.gz --rows dq-rows.csv
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

#: the states a trial starts from (module docstring)
STATES = ("idle_hot", "behind_hot", "idle_waited", "behind_waited")
POSITION_OPS = ("view", "elementwise_add", "rms_norm", "gemm")
CALLS, TRIALS = 40, 30
#: positions past the first few: a trial's steady part
STEADY = slice(5, None)
SEQUENCE_CASES = ((1, 2048), (64, 1024))
SEQUENCE_LAYERS, SEQUENCE_TRIALS = 16, 10
STEP_LAYERS = 32  # Llama-3.1-8B's decode layers: a step's host against its layers in sequence
#: ``a + b`` element counts (bf16) for the crossing: kernels of about 2-40 us on an H200
CROSSING_NUMEL = (4096, 1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20, 6 << 20, 8 << 20, 12 << 20, 16 << 20, 24 << 20)
CROSSING_CALLS, CROSSING_TRIALS = 200, 7
SLEEP_HZ = 1.98e9  # the H200's boost clock: torch.cuda._sleep counts cycles (as sweep.py)
FIELDS = ("section", "case", "state", "trial", "pos", "op", "ns")


# ------------------------------------------------------------------ measurement (the GPU machine)
class _Bench:
    """The run's records and the torch calls every section uses (imported on the GPU machine only)."""

    def __init__(self) -> None:
        import torch

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        self.torch = torch
        self.records: list[tuple] = []

    def sleep(self, seconds: float) -> None:
        self.torch.cuda._sleep(int(seconds * SLEEP_HZ))

    @staticmethod
    def spin(seconds: float) -> None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            pass

    def enter(self, state: str, sleep_s: float) -> None:
        """Put the host and the GPU in ``state`` (module docstring)."""
        self.torch.cuda.synchronize()
        if state.endswith("waited"):
            self.sleep(20e-3)
            self.torch.cuda.synchronize()
        if state.startswith("behind"):
            self.sleep(sleep_s)
        if state.endswith("hot"):
            self.spin(1e-3)

    def timed(self, fns, section: str, case: str, state: str, trial: int, ops) -> None:
        """Every call of ``fns`` timed on its own; then whether the GPU was still busy."""
        pc = time.perf_counter_ns
        ns = [0] * len(fns)
        for i, fn in enumerate(fns):
            t0 = pc()
            fn()
            ns[i] = pc() - t0
        still = not self.torch.cuda.current_stream().query()
        self.records += [(section, case, state, trial, i, op, n) for i, (op, n) in enumerate(zip(ops, ns, strict=True))]
        self.records.append((section, case, state, trial, -1, "gpu_still_busy", int(still)))

    def queued_ns(self, fn, calls: int) -> int:
        """GPU ns of ``calls`` calls of ``fn`` queued behind a sleep (CUDA events around them)."""
        cuda = self.torch.cuda
        self.sleep(20e-3)
        e0, e1 = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(calls):
            fn()
        e1.record()
        cuda.synchronize()
        return round(e0.elapsed_time(e1) * 1e6)

    def positions(self) -> None:
        torch, F = self.torch, self.torch.nn.functional
        dev, bf16 = "cuda", torch.bfloat16
        x1 = torch.randn(1, 4096, dtype=bf16, device=dev)  # sweep.dispatch_rows's operands
        w = torch.randn(4096, 4096, dtype=bf16, device=dev)
        a = torch.randn(1, 1, 32, 128, dtype=bf16, device=dev)
        b = torch.randn_like(a)
        qkv = torch.randn(1, 1, 6144, dtype=bf16, device=dev)
        norm_w = torch.ones(4096, dtype=bf16, device=dev)
        ops = {"view": lambda: qkv.view(1, 1, 48, 128), "elementwise_add": lambda: a + b,
               "rms_norm": lambda: F.rms_norm(x1, (4096,), norm_w, 1e-5), "gemm": lambda: F.linear(x1, w)}
        for name, fn in ops.items():
            for _ in range(20):
                fn()
            self.records.append(("positions", "gpu", "queued", 0, -1, name, self.queued_ns(fn, CALLS) // CALLS))
        for trial in range(TRIALS):
            for k, name in enumerate(POSITION_OPS):
                for j in range(len(STATES)):
                    state = STATES[(j + trial + k) % len(STATES)]  # the order rotates trial by trial
                    self.enter(state, 4e-3)
                    self.timed([ops[name]] * CALLS, "positions", name, state, trial, [name] * CALLS)
        torch.cuda.synchronize()

    def crossing(self) -> None:
        torch, pc = self.torch, time.perf_counter_ns
        for numel in CROSSING_NUMEL:
            xa = torch.randn(numel, dtype=torch.bfloat16, device="cuda")
            xb = torch.randn_like(xa)
            for _ in range(20):
                torch.add(xa, xb)
            for trial in range(CROSSING_TRIALS):
                gpu = self.queued_ns(lambda xa=xa, xb=xb: torch.add(xa, xb), CROSSING_CALLS)
                self.spin(1e-3)
                t0 = pc()
                for _ in range(CROSSING_CALLS):
                    torch.add(xa, xb)
                t1 = pc()
                torch.cuda.synchronize()
                t2 = pc()
                self.records += [("crossing", str(numel), state, trial, -1, "elementwise_add", v)
                                 for state, v in (("gpu", gpu), ("host", t1 - t0), ("wall", t2 - t0))]
            del xa, xb

    def sequence(self) -> None:
        import measure as M
        import sweep as S

        torch, pc = self.torch, time.perf_counter_ns
        layers, hidden, hq, hkv, hd, ffn, vocab = S.DECODE_MODELS["llama3.1-8b"]
        shape = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab)
        dev = torch.device("cuda")
        model = M.Llama(shape, dev)
        ctx = M.Ctx(device=dev, tiny=False)
        for batch, kv_len in SEQUENCE_CASES:
            case = f"b{batch}_l{kv_len}"
            step = M.decode_step(ctx, model, batch, kv_len)
            layer, extra = S.layer_sites(model, batch, kv_len, dev)
            fns = [fn for _, fn in layer] * SEQUENCE_LAYERS
            kinds = [kind for kind, _ in layer] * SEQUENCE_LAYERS
            for _ in range(3):
                step()
                S._site_pass(layer, 2, False)
            for trial in range(SEQUENCE_TRIALS):
                for j in range(len(STATES)):
                    state = STATES[(j + trial) % len(STATES)]
                    self.enter(state, 60e-3)
                    self.timed(fns, "sequence", case, state, trial, kinds)
                for mode in ("behind", "idle"):
                    costs, _ = S._site_pass(layer, 10, mode == "behind")
                    self.records += [("loop", case, mode, trial, i, kind, round(cost * 1e9))
                                     for i, ((kind, _), cost) in enumerate(zip(layer, costs, strict=True))]
                torch.cuda.synchronize()
                self.spin(1e-3)
                t0 = pc()
                step()
                t1 = pc()
                torch.cuda.synchronize()
                t2 = pc()
                self.records += [("step", case, "host", trial, -1, "eager_step", t1 - t0),
                                 ("step", case, "wall", trial, -1, "eager_step", t2 - t0)]
            del step, layer, extra, fns
            torch.cuda.empty_cache()

    def dispatch(self, rows_out: str) -> None:
        """``sweep.dispatch_rows`` itself: the documents' method on this host."""
        import measure as M
        import sweep as S

        ctx = M.Ctx(device=self.torch.device("cuda"), tiny=False)
        S.dispatch_rows(ctx, False, [])
        M.write(rows_out, ctx)


def _measure(out: str, rows_out: str) -> int:
    bench = _Bench()
    if not bench.torch.cuda.is_available():
        print("eager_backlog.py needs a CUDA GPU", file=sys.stderr)
        return 2
    bench.torch.manual_seed(0)
    for name in ("positions", "crossing", "sequence"):
        getattr(bench, name)()
        print(f"{name}: {len(bench.records)} records", flush=True)
    with gzip.open(out, "wt", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(FIELDS)
        wr.writerows(bench.records)
    bench.dispatch(rows_out)
    return 0


# ------------------------------------------------------------------ analysis (CPU)
def read(path: str) -> list[dict]:
    with gzip.open(path, "rt", newline="") as fh:
        return [dict(r, trial=int(r["trial"]), pos=int(r["pos"]), ns=int(r["ns"])) for r in csv.DictReader(fh)]


def dispatch_refs(rows_path: str) -> dict[tuple[str, str], float]:
    """(op, behind | idle) -> us a call from the run's ``dispatch`` rows (sweep.py's method). The
    ``extra`` field is parsed here, as ``rdusim.analysis.gpu.predict.row_extra`` does, because the
    run script analyses on the GPU machine, where rdusim is not installed."""
    with open(rows_path, newline="") as fh:
        return {(dict(kv.split("=", 1) for kv in r["extra"].split(";") if kv)["op"], r["mode"]): float(r["median_us"])
                for r in csv.DictReader(fh) if r["kind"] == "dispatch"}


def position_table(recs: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """(op, state) -> median us of the trials' call 0, call 1, call 2 and the steady calls (5-39)."""
    calls: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in recs:
        if r["section"] == "positions" and r["pos"] >= 0:
            calls[r["case"], r["state"], r["pos"]].append(r["ns"] / 1e3)
    out = {}
    for op in POSITION_OPS:
        for state in STATES:
            steady = [v for p in range(CALLS)[STEADY] for v in calls[op, state, p]]
            out[op, state] = {"call0": statistics.median(calls[op, state, 0]),
                              "call1": statistics.median(calls[op, state, 1]),
                              "call2": statistics.median(calls[op, state, 2]),
                              "steady": statistics.median(steady)}
    return out


def gpu_still_busy(recs: list[dict], section: str) -> dict[str, float]:
    """state -> share of trials whose GPU was still busy after the calls."""
    flags: dict[str, list[int]] = defaultdict(list)
    for r in recs:
        if r["section"] == section and r["op"] == "gpu_still_busy":
            flags[r["state"]].append(r["ns"])
    return {s: sum(v) / len(v) for s, v in flags.items()}


def _per_trial(recs: list[dict]) -> dict[tuple[str, str, int], float]:
    """(case, state | loop_behind | loop_idle | step_host | step_wall, trial) -> us: a layer's 36 calls
    in sequence (the mean of the 16 layers) or in loops, or the step's."""
    per: dict[tuple[str, str, int], float] = defaultdict(float)
    for r in recs:
        if r["section"] == "sequence" and r["pos"] >= 0:
            per[r["case"], r["state"], r["trial"]] += r["ns"] / 1e3 / SEQUENCE_LAYERS
        elif r["section"] == "loop":
            per[r["case"], f"loop_{r['state']}", r["trial"]] += r["ns"] / 1e3
        elif r["section"] == "step":
            per[r["case"], f"step_{r['state']}", r["trial"]] = r["ns"] / 1e3
    return per


def sequence_table(recs: list[dict]) -> dict[tuple[str, str], float]:
    """(case, state | loop_behind | loop_idle | step_host | step_wall) -> us, the median over trials
    of ``_per_trial``."""
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (case, state, _), v in _per_trial(recs).items():
        grouped[case, state].append(v)
    return {k: statistics.median(v) for k, v in grouped.items()}


def sequence_kinds(recs: list[dict], case: str) -> dict[tuple[str, str], float]:
    """(kind, state or loop_mode) -> median us a call of that kind in the sequence (layers 2-16:
    past the first layer) or in the loops."""
    vals: dict[tuple[str, str], list[float]] = defaultdict(list)
    per_layer = max(r["pos"] for r in recs if r["section"] == "loop" and r["case"] == case) + 1  # a layer's sites
    for r in recs:
        if r["case"] != case:
            continue
        if r["section"] == "sequence" and r["pos"] >= 0:
            if r["pos"] >= per_layer:
                vals[r["op"], r["state"]].append(r["ns"] / 1e3)
        elif r["section"] == "loop":
            vals[r["op"], f"loop_{r['state']}"].append(r["ns"] / 1e3)
    return {k: statistics.median(v) for k, v in vals.items()}


def sequence_pairs(recs: list[dict]) -> list[tuple[float, float]]:
    """(one layer's 36 calls in forward order, the same trial's loops of the layer's sites, GPU behind),
    seconds a layer, one pair per (case, trial, state): the input of ``launch.eager_sequence``
    (``rdusim.analysis.gpu.predict.sequence_ratio``; h200.yaml)."""
    per = _per_trial(recs)
    return [(v * 1e-6, per[case, "loop_behind", trial] * 1e-6) for (case, state, trial), v in sorted(per.items())
            if state in STATES]


def crossing_table(recs: list[dict]) -> list[tuple[int, float, float, float]]:
    """(numel, GPU us a call, host us a call, wall us a call), medians over trials."""
    vals: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in recs:
        if r["section"] == "crossing":
            vals[r["case"], r["state"]].append(r["ns"] / 1e3 / CROSSING_CALLS)
    return [(n, *(statistics.median(vals[str(n), s]) for s in ("gpu", "host", "wall"))) for n in CROSSING_NUMEL]


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}"


def analyse(path: str, rows_path: str) -> str:
    recs = read(path)
    refs = dispatch_refs(rows_path)
    pos = position_table(recs)
    gpu = {r["op"]: r["ns"] / 1e3 for r in recs if r["section"] == "positions" and r["case"] == "gpu"}
    lines = [f"# Run dq: the host's cost of an eager op by the GPU's backlog and the host's state ({Path(path).name})", ""]
    lines += ["## Calls one by one (`positions`): median us a call over 30 trials", "",
              "| op | GPU us a call (queued) | dispatch behind | dispatch idle | state | call 0 | call 1 | call 2 | "
              "calls 5-39 |", "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for op in POSITION_OPS:
        for state in STATES:
            p = pos[op, state]
            lines.append(f"| {op} | {gpu[op]:.2f} | {refs.get((op, 'behind'), float('nan')):.2f} | "
                         f"{refs.get((op, 'idle'), float('nan')):.2f} | {state} | {p['call0']:.2f} | {p['call1']:.2f} | "
                         f"{p['call2']:.2f} | {p['steady']:.2f} |")
    busy = gpu_still_busy(recs, "positions")
    lines += ["", "GPU still busy after a trial's calls (share of trials): "
              + ", ".join(f"{s} {busy.get(s, 0):.2f}" for s in STATES), ""]
    lines += ["## Checks (registered in h200-20261201dq-backlog-hypotheses.md)", ""]
    lines += checks(pos, refs)
    seq = sequence_table(recs)
    lines += ["", "## One Llama-3.1-8B layer's 36 calls (`sequence`), us a layer (median over 10 trials)", "",
              "| case | idle_hot | behind_hot | idle_waited | behind_waited | loop behind | loop idle | "
              "behind_hot / loop behind | step host issue | step wall | step host / 32 layers of behind_hot |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for batch, kv_len in SEQUENCE_CASES:
        c = f"b{batch}_l{kv_len}"
        g = {k[1]: v for k, v in seq.items() if k[0] == c}
        lines.append(f"| {c} | {g['idle_hot']:.0f} | {g['behind_hot']:.0f} | {g['idle_waited']:.0f} | "
                     f"{g['behind_waited']:.0f} | {g['loop_behind']:.0f} | {g['loop_idle']:.0f} | "
                     f"{_ratio(g['behind_hot'], g['loop_behind'])} | {g['step_host']:.0f} | {g['step_wall']:.0f} | "
                     f"{_ratio(g['step_host'], STEP_LAYERS * g['behind_hot'])} |")
    lines += ["", "By kind (us a call; the sequence's layers 2-16, the loops' 10 calls):", "",
              "| case | kind | idle_hot | behind_hot | idle_waited | behind_waited | loop behind | loop idle |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for batch, kv_len in SEQUENCE_CASES:
        c = f"b{batch}_l{kv_len}"
        kinds = sequence_kinds(recs, c)
        for kind in dict.fromkeys(k for k, _ in kinds):
            cells = " | ".join(f"{kinds.get((kind, s), float('nan')):.2f}"
                               for s in (*STATES, "loop_behind", "loop_idle"))
            lines.append(f"| {c} | {kind} | {cells} |")
    lines += ["", "## `a + b` back to back across the crossing (`crossing`), us a call (median over 7 trials)", "",
              "| elements | GPU (queued) | host (before the synchronize) | wall | wall / max(host, GPU) |",
              "|---:|---:|---:|---:|---:|"]
    for n, g_us, h_us, w_us in crossing_table(recs):
        lines.append(f"| {n} | {g_us:.2f} | {h_us:.2f} | {w_us:.2f} | {w_us / max(h_us, g_us):.3f} |")
    return "\n".join(lines) + "\n"


def checks(pos: dict, refs: dict) -> list[str]:
    """The registered checks (hypotheses file): C1 the engine's rule, C2 the host's state, C3 the
    documents' idle figure is the waited state."""
    out = []
    kernel_ops = [op for op in POSITION_OPS if op != "view"]
    gpu_state = {op: pos[op, "idle_hot"]["steady"] / pos[op, "behind_hot"]["steady"] for op in POSITION_OPS}
    one_behind = {op: pos[op, "behind_hot"]["call0"] / pos[op, "idle_hot"]["steady"] for op in kernel_ops}
    waited = {op: pos[op, "idle_waited"]["call0"] / pos[op, "idle_hot"]["call0"] for op in POSITION_OPS}
    doc = {op: refs[op, "idle"] / refs[op, "behind"] for op in POSITION_OPS if (op, "idle") in refs}
    c1 = all(r >= 1.05 for op, r in gpu_state.items() if op != "view")
    c2 = all(abs(r - 1) < 0.05 for r in gpu_state.values())
    out.append("| check | figure by op | holds |")
    out.append("|---|---|---|")
    fmt = lambda d: ", ".join(f"{k} {v:.3f}" for k, v in d.items())  # noqa: E731
    out.append(f"| C1 (the engine's rule): idle_hot / behind_hot, calls 5-39, >= 1.05 for every op with a kernel | "
               f"{fmt(gpu_state)} | {'yes' if c1 else 'no'} |")
    out.append(f"| C1b: behind_hot's call 0 (one kernel unfinished) / idle_hot, near 1 under the rule | "
               f"{fmt(one_behind)} | (shown) |")
    out.append(f"| C2 (the host's state): idle_hot / behind_hot within 5% for every op, view included | "
               f"{fmt(gpu_state)} | {'yes' if c2 else 'no'} |")
    out.append(f"| C3: idle_waited / idle_hot, call 0 (the first call after a waited synchronize) | {fmt(waited)} | (shown) |")
    out.append(f"| the documents' method on this host: dispatch idle / behind | {fmt(doc)} | (shown) |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="measure: the per-call records (csv.gz)")
    ap.add_argument("--rows", required=True, help="the dispatch rows (sweep.py's CSV)")
    ap.add_argument("--analyse", metavar="CSV_GZ", help="analyse a run's records (CPU)")
    ap.add_argument("--write", metavar="TXT", help="with --analyse: also write the report here")
    args = ap.parse_args(argv)
    if args.analyse:
        text = analyse(args.analyse, args.rows)
        print(text, end="")
        if args.write:
            Path(args.write).write_text(text)
        return 0
    if not args.out:
        ap.error("give --out to measure or --analyse to analyse")
    return _measure(args.out, args.rows)


if __name__ == "__main__":
    sys.exit(main())
