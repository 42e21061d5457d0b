"""The full rdusim-vs-kvpress table of docs/kernels.md ("Differential tests against kvpress").

    python -m tests.differential.report [--trials 5] [--json out.json]

Every case of ``kvpress_harness.CASES`` on both natural-text prompts at 128 and 256 slots, then
passkey retrieval at 2K tokens with 128 and 256 slots for the matching cases (``trials`` keys at
depths spread over (0, 1), seeded). Prints Markdown tables; about 20 minutes on a quiet
2-core machine (one torch thread).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np
import torch

from rdusim.kernels import lm
from tests.differential import kvpress_harness as harness

BUDGETS = (128, 256)
PASSKEY_CASES = ("snapkv", "streamingllm", "h2o")


def natural_rows() -> list[harness.Comparison]:
    rows = []
    for prompt in harness.PROMPT_FILES:
        ids = harness.prompt_ids(prompt)
        prefill = lm.prefill_prompt(harness.rdusim_model(), ids)
        for case in harness.CASES.values():
            for budget in BUDGETS:
                rows.append(harness.compare(case, prompt, ids, budget, prefill=prefill))
                print(f"  {case.name} {prompt} {budget}", file=sys.stderr)
    return rows


def passkey_rows(trials: int) -> list[dict[str, object]]:
    model = harness.rdusim_model()
    rng = np.random.default_rng(0)
    depths = [(i + 0.5) / trials for i in range(trials)]
    tally = {(c, b): [0, 0, 0] for c in PASSKEY_CASES for b in BUDGETS}
    for depth in depths:
        prompt = lm.make_passkey_prompt(
            model, context=2048, depth=depth, key=lm.passkey.random_key(rng)
        )
        prefill = lm.prefill_prompt(model, prompt.token_ids)
        for case in PASSKEY_CASES:
            answers = harness.passkey_answers(
                harness.PASSKEY_CASES[case], prompt, BUDGETS, prefill
            )
            for budget, (ours, theirs) in answers.items():
                counts = tally[case, budget]
                counts[0] += ours
                counts[1] += theirs
                counts[2] += ours == theirs
            print(f"  passkey depth {depth:.2f} {case}: {answers}", file=sys.stderr)
    return [
        {"case": c, "budget": b, "tokens": 2048, "trials": trials, "rdusim": r, "kvpress": k,
         "same_answer": s}
        for (c, b), (r, k, s) in tally.items()
    ]  # fmt: skip


def markdown(rows: list[harness.Comparison], passkey: list[dict[str, object]]) -> str:
    lines = [
        "| case | prompt (tokens) | slots | Jaccard mean (worst) | Jaccard, same Q/K | "
        "max abs logit diff, step 1 | idem, agreed steps | greedy agree | Jaccard, step 19 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.case} | {r.prompt} ({r.tokens}) | {r.budget} | {r.jaccard:.4f} "
            f"({r.jaccard_min:.3f}) | {r.jaccard_kernel:.4f} | {r.max_logit_diff:.1e} | "
            f"{r.max_logit_diff_agreed:.1e} | {r.greedy_agree}/{r.greedy_tokens} | "
            f"{r.jaccard_end:.4f} |"
        )
    lines += [
        "",
        "| case | slots | passkey correct, rdusim | passkey correct, kvpress | same verdict |",
        "|---|---:|---:|---:|---:|",
    ]
    for p in passkey:
        n = p["trials"]
        lines.append(
            f"| {p['case']} | {p['budget']} | {p['rdusim']}/{n} | {p['kvpress']}/{n} | "
            f"{p['same_answer']}/{n} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="passkey keys (depths) per cell")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.time()
    rows = natural_rows()
    passkey = passkey_rows(args.trials)
    print(markdown(rows, passkey))
    print(f"\n({time.time() - start:.0f} s)")
    if args.json:
        data = {"natural": [dataclasses.asdict(r) for r in rows], "passkey": passkey}
        with open(args.json, "w") as handle:
            json.dump(data, handle, indent=1)


if __name__ == "__main__":
    main()
