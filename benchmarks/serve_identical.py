"""Every output of ``rdusim serve`` and ``rdusim serve-sweep`` on the shipped serving configs,
this tree against another commit, compared byte for byte.

    python benchmarks/serve_identical.py [--base 113fc60] [--big 1000000] [--cases a,b]

The base commit is unpacked (``git archive``) into a temporary folder; each case runs in a fresh
process per side (``PYTHONPATH`` = the side's tree), with its own output folder, under
``/usr/bin/time`` (peak RSS, CPU). Reported per case: each file the same or not (sha256), the
printed summary the same or not, and each side's wall time and peak RSS. ``latency_cdf.png`` is
reported apart: since issue 20 item 3 the figure draws 1,000 exact quantiles instead of every
request, so its bytes differ wherever more than 1,000 requests finished.
``--big N`` adds DeepSeek-R1 SnapStream with N requests (the issue's million).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = "tests/data/serving/llama-small.yaml"
DSR1 = "mappings/deepseek-r1/serve.yaml"
SNAP = "mappings/deepseek-r1/serve-snapstream.yaml"
GEN = ["--prompt-tokens", "lognormal:1024,0.6", "--output-tokens", "uniform:1,64"]
CASES = {
    "snapstream": ["serve", SNAP, "--rate", "1.5", "--requests", "3000", "--seed", "0"],
    "full-cache": ["serve", DSR1, "--rate", "0.5", "--requests", "2000", "--seed", "0"],
    "small": ["serve", SMALL, "--rate", "2", "--requests", "2000", *GEN],
    "small-2-decode-nodes": ["serve", SMALL, "--rate", "4", "--requests", "2000", *GEN, "--set", "decode.nodes=2"],
    "small-spf": ["serve", SMALL, "--rate", "3", "--requests", "2000", *GEN, "--set", "scheduling=shortest_prompt_first"],
    "small-colocated": ["serve", "{colocated}", "--rate", "1", "--requests", "1000", *GEN],
    "small-colocated-chunked": ["serve", "{colocated}", "--rate", "1", "--requests", "1000", *GEN,
                                "--set", "prefill.chunk_tokens=256"],
    "replay-requests": ["serve", SMALL, "--trace", "tests/data/serving/requests.csv"],
    "replay-azure": ["serve", SMALL, "--trace", "tests/data/serving/azure.csv"],
    "sweep-small": ["serve-sweep", f"{SMALL},{SMALL}", "--rate", "1,4", "--duration", "300", *GEN, "--workers", "1",
                    "--plot", "{out}/goodput.png"],
    "sweep-dsr1": ["serve-sweep", f"{DSR1},{SNAP}", "--rate", "0.5,1.5", "--requests", "1000", "--workers", "1",
                   "--plot", "{out}/goodput.png"],
}


def _colocated(tree: Path, out: Path) -> str:
    """The small deployment co-located: two nodes running both phases."""
    text = (tree / SMALL).read_text(encoding="utf-8").replace("../../../mappings", str(tree / "mappings"))
    text = text.replace("layout: disaggregated", "layout: colocated").replace("  nodes: 2\n", "")
    text = text.replace("decode:\n", "decode:\n  nodes: 2\n", 1).replace("  nodes: 1\n", "")
    path = out.parent / f"{out.name}.colocated.yaml"   # beside the outputs compared
    path.write_text(text, encoding="utf-8")
    return str(path)


def _run(tree: Path, argv: list[str], out: Path) -> dict:
    out.mkdir(parents=True)
    argv = [a.replace("{out}", str(out)) for a in argv]
    argv = [_colocated(tree, out) if a == "{colocated}" else a for a in argv]
    command = ["/usr/bin/time", "-f", "%M %U %S", sys.executable, "-c", "import sys; from rdusim.cli import main; "
               "sys.exit(main(sys.argv[1:]))", *argv, "--out", str(out / "out")]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=os.environ | {"PYTHONPATH": str(tree)}, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed in {tree}:\n{done.stderr[-3000:]}")
    rss_kb, user, system = done.stderr.strip().splitlines()[-1].split()
    (out / "stdout.txt").write_text(done.stdout.replace(str(out), "OUT"), encoding="utf-8")
    return {"wall_s": wall, "cpu_s": float(user) + float(system), "peak_rss_mib": int(rss_kb) / 1024}


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="113fc60")
    parser.add_argument("--big", type=int, help="add DeepSeek-R1 SnapStream with this many requests")
    parser.add_argument("--cases", help="comma-separated subset of the cases")
    args = parser.parse_args()
    cases = dict(CASES)
    if args.cases:
        cases = {k: v for k, v in cases.items() if k in args.cases.split(",")}
    if args.big:
        cases[f"snapstream-{args.big}"] = ["serve", SNAP, "--rate", "1.5", "--requests", str(args.big), "--seed", "0"]
    same_all = True
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.base], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        for name, argv in cases.items():
            sides = {}
            for side, tree in (("base", base), ("this", ROOT)):
                out = Path(tmp) / side / name
                sides[side] = (_run(tree, argv, out), _digests(out))
            (a_run, a), (b_run, b) = sides["base"], sides["this"]
            differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            figures = [k for k in differ if k.endswith(".png")]
            others = [k for k in differ if not k.endswith(".png")]
            same_all &= not others
            print(f"{name}: {len(a)} files; {'all text outputs the same' if not others else 'DIFFER: ' + ', '.join(others)}"
                  f"{'; figures differ: ' + ', '.join(figures) if figures else ''}; base {a_run['wall_s']:.1f} s "
                  f"(CPU {a_run['cpu_s']:.1f} s) {a_run['peak_rss_mib']:.0f} MiB, this {b_run['wall_s']:.1f} s "
                  f"(CPU {b_run['cpu_s']:.1f} s) {b_run['peak_rss_mib']:.0f} MiB "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
            if args.big and name.startswith("snapstream-"):
                for key, digest in sorted(b.items()):
                    print(f"    {key} {digest[:16]}", flush=True)
    print("every text output the same" if same_all else "SOME TEXT OUTPUTS DIFFER")
    sys.exit(0 if same_all else 1)


if __name__ == "__main__":
    main()
