"""The known-miss record of ``rdusim fidelity --gpu`` (benchmarks/gpu/fidelity-known-misses.csv),
rewritten from the table as it stands.

    PYTHONPATH=. python benchmarks/gpu/fidelity_known_misses.py [--check] [--all]

One row per prediction group outside its tolerance whose acceptance item has a reason in
``rdusim.analysis.gpu.fidelity.KNOWN_MISSES``, at its own median and worst error rounded up to
0.1% (``record_rows``); a group within its tolerance gets none, so it is a regression as soon as
it leaves it. Rerun it after adding a measurement CSV to the table or a reason to
``KNOWN_MISSES``, and read the diff before committing it: recording a group that is worse than
its old row accepts that regression. It prints what changed against the committed record
(groups added, dropped, loosened, tightened) and the groups outside their tolerance that no
reason covers (never recorded: they stay regressions). ``--check``: write nothing, exit 1 when
the committed record is not today's. About a minute (the whole table).

Exit 2, before the table, when the committed record does not parse (``read_record``'s located
error): fix it, or delete it to write it afresh (every row then reads as added); a missing
record is an empty one. Exit 2 too when a measurement or document does not parse, or the record
cannot be written (it is written to a temporary file beside it, then renamed into place).

The record covers ``rdusim fidelity --gpu --all``'s groups too. ``--all`` rewrites every row from
that table (several minutes); without it, the default table's groups are rewritten and the rows of
the groups only ``--all`` compares are kept as they are (``record_update``), so ``--check`` passes
on either table when the record is today's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rdusim.analysis.gpu import fidelity as fid
from rdusim.cli.output import write_atomic
from rdusim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def changes(old: dict, new: dict) -> list[str]:
    """What ``new`` (a record, ``read_record``'s form) changes against ``old``, one line each."""
    lines = []
    for key in new:
        if key not in old:
            lines.append(f"added: {key}: {_pct(new[key][0])} / {_pct(new[key][1])}")
        elif new[key] != old[key]:
            worse = new[key][0] > old[key][0] or new[key][1] > old[key][1]
            lines.append(
                f"{'loosened' if worse else 'tightened'}: {key}: {_pct(old[key][0])} / "
                f"{_pct(old[key][1])} -> {_pct(new[key][0])} / {_pct(new[key][1])}"
            )
    lines += [f"dropped (within now, or gone): {key}" for key in old if key not in new]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when the record is not today's"
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="all_sets",
        help="rewrite from the --all table (every group); without it the rows of --all's groups are kept",
    )
    args = parser.parse_args(argv)
    path = ROOT / fid.KNOWN_MISS_RECORD
    exists = path.exists() or path.is_symlink()
    try:
        # the committed record first: one that does not parse is fixed (or deleted) before the
        # table's minutes, never read as empty (every row "added" would hide what changed)
        old = fid.read_record(ROOT) if exists else {}
        old_rows = fid.record_file_rows(ROOT) if exists else []
        frame = fid.gpu_fidelity(ROOT, recorded={}, all_sets=args.all_sets)  # the verdicts are not used
    except ConfigError as error:
        return _error(error)
    rows = fid.record_update(frame, old_rows)
    text = fid.record_text(rows)
    new = {
        fid.record_key(r["acceptance"], r["csv"], r["gpu"], r["kind"]): (
            float(r["median_abs_error"]),
            float(r["worst_abs_error"]),
        )
        for r in rows
    }
    lines = changes(old, new)
    uncovered = frame[(frame["within"] == "no") & ~frame["acceptance"].isin(list(fid.KNOWN_MISSES))]
    lines += [
        f"outside its tolerance, no reason in KNOWN_MISSES (a regression, not recorded): "
        f"{r.set}, {r.gpu}, {r.kind}: {_pct(r.median_abs_error)} / {_pct(r.worst_error)}"
        for r in uncovered.itertuples()
    ]
    same = path.is_file() and path.read_text() == text
    print(f"{path.relative_to(ROOT)}: {len(rows)} groups recorded; "
          + ("unchanged" if same else ("differs (--check)" if args.check else "written")))
    for line in lines:
        print(f"- {line}")
    if args.check:
        return 0 if same else 1
    if not same:
        try:
            write_atomic(path, text, "the record")
        except ConfigError as error:
            return _error(error)
    return 0


def _error(error: ConfigError) -> int:
    """A user's error as the CLI prints one (stderr), exit 2."""
    print(f"{Path(__file__).name}: error:", file=sys.stderr)
    for issue in error.issues:
        print(f"  {issue}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
