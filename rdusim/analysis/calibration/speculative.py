"""The speculative-decoding figures (``published.SPECULATIVE_FIGURES``), as the SD mappings predict them.

Owns: ``speculative_figures`` (a fidelity group), ``speedup``, ``sensitivity`` (every SD figure
at other acceptance rates, docs/speculative.md). Imports: result, published.

R1 Table IV's 70B/405B rows are the shipped SD mappings' tokens/s/user
(mappings/llama-3.1-{70b,405b}/decode-sd.yaml). A speedup is SD tokens/s/user over the same
mapping at ``speculative.k = 0`` (exactly plain decoding) at the same point; R4's points are
k = 9, batch 1 and a 4K context unless the figure varies one of them. Every value uses the
acceptance rate the mapping cites; nothing here is fitted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from rdusim.analysis.calibration.published import SPECULATIVE_FIGURES
from rdusim.analysis.result import simulate

if TYPE_CHECKING:  # the group's value type lives in fidelity, which imports this module
    from rdusim.analysis.calibration.fidelity import Modelled

SD_70B = Path("mappings/llama-3.1-70b/decode-sd.yaml")
SD_405B = Path("mappings/llama-3.1-405b/decode-sd.yaml")
AT_4K = ("workload.seq_len=4096",)


def speedup(root: Path, mapping: Path, overrides: tuple[str, ...] | list[str]) -> float:
    """SD tokens/s/user over plain decoding (``k = 0``) of the same mapping and point."""
    sd = simulate(root / mapping, overrides=list(overrides), record_events=False)
    plain = simulate(root / mapping, overrides=[*overrides, "speculative.k=0"], record_events=False)
    return sd.tokens_per_s_per_user / plain.tokens_per_s_per_user


def speculative_figures(root: Path, extra: tuple[str, ...] = ()) -> dict[str, Modelled]:
    """The model's value (or a trend's points) for every ``SPECULATIVE_FIGURES`` row; ``extra``
    overrides every simulated mapping (e.g. another acceptance rate, for the sensitivity table)."""
    from rdusim.analysis.calibration.fidelity import Modelled  # noqa: PLC0415 (fidelity imports this module)

    names = [f.name for f in SPECULATIVE_FIGURES]
    at_4k = (*AT_4K, *extra)
    per_user = {path: simulate(root / path, overrides=list(extra), record_events=False) for path in (SD_70B, SD_405B)}
    values = {
        names[0]: Modelled(per_user[SD_70B].tokens_per_s_per_user, detail=f"{SD_70B}: 1B draft, k=9, batch 1"),
        names[1]: Modelled(per_user[SD_405B].tokens_per_s_per_user, detail=f"{SD_405B}: 3B draft, k=9, batch 1"),
        names[2]: Modelled(speedup(root, SD_405B, at_4k), detail=f"{SD_405B} at 4K over k=0"),
        names[3]: Modelled(speedup(root, SD_70B, at_4k), detail=f"{SD_70B} at 4K over k=0"),
    }
    # target/draft parameter ratio: 70B/3B 23, 70B/1B 57, 405B/3B 126, 405B/1B 328
    ratio = [(f"{target}/{draft}", speedup(root, path, [*at_4k, f"speculative.draft=llama-3.2-{draft.lower()}"]))
             for target, path, draft in (("70B", SD_70B, "3B"), ("70B", SD_70B, "1B"), ("405B", SD_405B, "3B"),
                                         ("405B", SD_405B, "1B"))]
    values[names[4]] = Modelled(points=tuple(ratio))
    values[names[5]] = Modelled(points=tuple((f"k={k}", speedup(root, SD_70B, [*at_4k, f"speculative.k={k}"]))
                                             for k in (3, 6, 9)))
    values[names[6]] = Modelled(points=tuple((f"BS {b}", speedup(root, SD_70B, [*at_4k, f"workload.batch={b}"]))
                                             for b in (1, 4, 16)))
    values[names[7]] = Modelled(points=tuple(
        (f"{n // 1024}K", speedup(root, SD_70B, [f"workload.seq_len={n}", f"deployment.max_prompt={n}", *extra]))
        for n in (4096, 32768)))
    return values


def sensitivity(root: Path, rates: tuple[float, ...]) -> pd.DataFrame:
    """Every SD figure at each acceptance rate (both mappings' rate replaced): one row per figure,
    one column per rate; a number, or for a trend whether its order holds."""
    from rdusim.analysis.calibration.fidelity import _row  # noqa: PLC0415 (fidelity imports this module)

    columns: dict[str, list[object]] = {"figure": [f.name for f in SPECULATIVE_FIGURES],
                                        "published": [f.value for f in SPECULATIVE_FIGURES]}
    for rate in rates:
        values = speculative_figures(root, (f"speculative.acceptance.rate={rate}",))
        rows = [_row(f, values[f.name]) for f in SPECULATIVE_FIGURES]
        columns[f"a={rate:g}"] = [("holds" if r["within"] else "does not hold") if f.is_trend else r["model"]
                                  for f, r in zip(SPECULATIVE_FIGURES, rows, strict=True)]
    return pd.DataFrame(columns)
