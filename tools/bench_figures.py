"""Rewrite the benchmark figures quoted in docs/guides/running.md and docs/RELIABILITY.md from a
run.

A quoted figure lives in a delimited block that names the command producing it::

    <!-- figures: python benchmarks/bench_orchestration.py --runs 3 -->
    ...whatever the last run wrote: its date, load and RESULT lines...
    <!-- /figures -->

``python tools/bench_figures.py docs/guides/running.md docs/RELIABILITY.md`` runs each block's
command from the repository root (``python`` is this interpreter) and rewrites the block: the
command, the UTC date, the load average before → after and the command's ``RESULT`` lines (the
format of benchmarks/benchkit/results.py). ``--only TEXT`` keeps the blocks whose command
holds TEXT; ``--from FILE`` (with ``--only``) takes the RESULT lines from a saved output of that
command instead of running it (a run made elsewhere, e.g. as root), dated by the file's time or
``--date``, with the load given by ``--load``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from benchkit.results import parse_results  # noqa: E402

BLOCK = re.compile(r"(<!-- figures: (?P<cmd>[^\n]+?) -->\n)(?P<body>.*?)(<!-- /figures -->)",
                   re.S)


def blocks(text: str) -> list[str]:
    """The commands of the figure blocks of a Markdown text, in order."""
    return [m["cmd"] for m in BLOCK.finditer(text)]


def render(command: str, output: str, when: datetime.datetime, load: str, doc: str) -> str:
    """A block's body: where its figures come from, then its RESULT lines."""
    lines = [r.line() for r in parse_results(output)]
    if not lines:
        raise SystemExit(f"`{command}` printed no RESULT line:\n{output[-2000:]}")
    return (f"Produced by `{command}` on {when:%Y-%m-%d %H:%M} UTC ({load}); "
            f"regenerate with `python tools/bench_figures.py {doc} --only "
            f"{shlex.split(command)[1]}`.\n\n```text\n" + "\n".join(lines) + "\n```\n")


def rewrite(text: str, command: str, body: str) -> str:
    """``text`` with the body of ``command``'s block replaced."""
    def swap(m: re.Match[str]) -> str:
        return m[1] + body + m[4] if m["cmd"] == command else m[0]
    return BLOCK.sub(swap, text)


def run(command: str) -> tuple[str, datetime.datetime, str]:
    """Run a block's command; its output, start date and load average before → after."""
    argv = shlex.split(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    when = datetime.datetime.now(datetime.UTC)
    before = os.getloadavg()[0]
    t0 = time.monotonic()
    print(f"[{when:%H:%M:%S}] {command}", file=sys.stderr, flush=True)
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr[-2000:])
    load = (f"load average {before:.1f} → {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, "
            f"{time.monotonic() - t0:.0f} s")
    return done.stdout, when, load


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--only", help="only the blocks whose command holds this text")
    ap.add_argument("--from", dest="source", type=Path,
                    help="a saved output of the block's command (needs --only)")
    ap.add_argument("--load", default="load not recorded",
                    help="with --from: the load while it ran, as the block should state it")
    ap.add_argument("--date", type=datetime.datetime.fromisoformat,
                    help="with --from: when the run started (ISO, UTC), default the file's time")
    args = ap.parse_args(argv)
    if args.source and not args.only:
        ap.error("--from needs --only (which block the output belongs to)")
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        commands = [c for c in blocks(text) if not args.only or args.only in c]
        for command in commands:
            if args.source:
                output = args.source.read_text(encoding="utf-8")
                when = args.date or datetime.datetime.fromtimestamp(
                    args.source.stat().st_mtime, datetime.UTC)
                load = args.load
            else:
                output, when, load = run(command)
            text = rewrite(text, command, render(command, output, when, load, str(path)))
            path.write_text(text, encoding="utf-8")  # each block as soon as it is produced
            print(f"{path}: rewrote `{command}`", file=sys.stderr)
        if args.only and not commands:
            print(f"{path}: no figures block whose command holds {args.only!r}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
