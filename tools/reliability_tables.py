"""Regenerate the tables of docs/RELIABILITY.md: runs tests/reliability (and, with --remote,
the remote injection and interrupt tests on the namespace hosts: root only) in this process and
prints the fuzz outcomes, garbage servers × outcome, injection values × path → outcome, the
secret scan and the interrupt cases of the suite as Markdown. With --interrupts it also runs
benchmarks/bench_interrupts.py (the issue's full counts: 20 Ctrl-C/SIGTERM and 10 SIGKILL +
resume moments on the emulator, 5 + 1 on Docker over SSH with --remote) and prints its table.

    PYTHONPATH=. python tools/reliability_tables.py [--remote] [--interrupts] [--chaos]
        [--gate [DIR]]

``--chaos`` also runs benchmarks/bench_chaos.py (the whole chaos matrix: faults × backends;
root for the SSH and Docker backends) and prints its table; ``--gate`` runs
benchmarks/bench_gate.py with ``--old-rule`` (``--gate DIR``: on the run folders a
``bench_gate.py --keep DIR`` left, no sweep) and prints its false-alarm and detection rates.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


class _Outcomes:
    """Each test's outcome, by node id."""

    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.by_id[report.nodeid] = report.outcome


def _module(suffix: str) -> ModuleType:
    for name, mod in sys.modules.items():
        if name.split(".")[-1] == suffix:
            return mod
    raise SystemExit(f"{suffix} was not imported: did the tests run?")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", "\\n") for c in r) + " |"
            for r in rows]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--remote", action="store_true",
                    help="also run tests/remote/test_injection_remote.py (needs root)")
    ap.add_argument("--interrupts", action="store_true",
                    help="also run benchmarks/bench_interrupts.py (the full counts, minutes)")
    ap.add_argument("--chaos", action="store_true",
                    help="also run benchmarks/bench_chaos.py and print the chaos matrix")
    ap.add_argument("--gate", nargs="?", const="", default=None, metavar="DIR",
                    help="also run benchmarks/bench_gate.py --old-rule (DIR: --reuse DIR)")
    args = ap.parse_args()
    paths = [str(REPO / "tests" / "reliability")]
    if args.remote:
        paths.append(str(REPO / "tests" / "remote" / "test_injection_remote.py"))
        paths.append(str(REPO / "tests" / "remote" / "test_interrupts_remote.py"))
    seen = _Outcomes()
    rc = pytest.main([*paths, "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO)],
                     plugins=[seen])
    fuzz = _module("test_fuzz_matrix")
    garbage = _module("test_garbage_servers")
    inject = _module("test_injection")
    secrets = _module("test_no_secret_in_artifacts")

    print("\n## Fuzzed sweep files\n")
    counts: Counter[tuple[str, str]] = fuzz.OUTCOMES
    kinds = list(fuzz.KINDS)
    outcomes = sorted({o for _, o in counts})
    rows = [[k, *(counts.get((k, o), 0) for o in outcomes), sum(counts.get((k, o), 0)
                                                                for o in outcomes)]
            for k in kinds]
    rows.append(["**all**", *(sum(counts.get((k, o), 0) for k in kinds) for o in outcomes),
                 sum(counts.values())])
    print(_table(["kind", *outcomes, "files"], rows))
    other = [n for n, o in seen.by_id.items() if "test_fuzz_matrix" in n and o != "passed"]
    print(f"\nother exception or a message without file and key/line: "
          f"{'none' if not other else ', '.join(other)}")
    broken = {n.split("[")[1][:-1]: o for n, o in seen.by_id.items()
              if "test_broken_file_is_a_usage_error" in n}
    print("\n" + _table(["broken file (pytester run)", "exit code 4, file named, nothing "
                         "started"], [[k, v] for k, v in sorted(broken.items())]))

    print("\n## Garbage servers\n")
    print(_table(["server answer", "outcome"], sorted(garbage.OUTCOMES.items())))

    print("\n## Injection\n")
    values = list(inject.HOSTILE)
    groups: dict[str, list[str]] = {}
    for _, path in inject.OUTCOMES:
        group, _, where = path.partition(": ")
        groups.setdefault(group, [])
        if where not in groups[group]:
            groups[group].append(where)
    remote = {n.split("::")[-1]: o for n, o in seen.by_id.items()
              if "test_injection_remote" in n}
    head = ["value", *(f"{g} ({', '.join(ws)})" for g, ws in groups.items())]
    if args.remote:
        head += ["remote ssh-process (h601)", "remote docker (h602)"]
    rows = []
    for v in values:
        row: list[Any] = [v]
        for g, ws in groups.items():
            got = [inject.OUTCOMES.get((v, f"{g}: {w}"), "not run") for w in ws]
            ok = sum("MatrixError" in o or o.startswith("one argument") for o in got)
            word = "refused" if g == "refused" else "intact"
            row.append(f"{word} {ok}/{len(ws)}")
        if args.remote:
            for t in ("test_ssh_process_rank_gets_hostile_values_intact",
                      "test_docker_rank_gets_hostile_values_intact"):
                row.append("intact" if remote.get(t) == "passed" else remote.get(t, "not run"))
        rows.append(row)
    print(_table(head, rows))
    print("\nmarker file created by any of them: "
          f"{'yes' if inject.MARKER.exists() else 'no'} ({inject.MARKER})")

    print("\n## Secret scan\n")
    scanned = secrets.SCANNED
    hits = secrets.HITS
    print(f"scanned: {scanned.get('files', 0)} files (the run folder, JUnit XML, report.html) "
          f"and {scanned.get('outputs', 0)} outputs (pytest stdout, stderr)\n")
    names = scanned.get("secrets", [])
    print(_table(["planted secret", "hits"],
                 [[n, sum(h.startswith(n + " in ") for h in hits)] for n in names]))
    for h in hits:
        print(f"- {h}")
    rc = _interrupts(args.remote, args.interrupts) or int(rc)
    return int(rc) | _benchmarks(args)


def _benchmarks(args: argparse.Namespace) -> int:
    """The chaos matrix and the gate's rates, printed by their benchmarks (sections 6 and 7)."""
    rc = 0
    if args.gate is not None:
        print("\n## Gate noise rule (benchmarks/bench_gate.py)\n", flush=True)
        reuse = ["--reuse", args.gate] if args.gate else []
        rc |= subprocess.call([sys.executable, str(REPO / "benchmarks" / "bench_gate.py"),
                               "--old-rule", *reuse])
    if args.chaos:
        print("\n## Chaos matrix (benchmarks/bench_chaos.py)\n", flush=True)
        rc |= subprocess.call([sys.executable, str(REPO / "benchmarks" / "bench_chaos.py")])
    return rc


def _interrupts(remote: bool, full: bool) -> int:
    """The interrupt cases the suite ran; with ``full`` the benchmark's full counts."""
    from benchkit.interrupts import table, totals

    print("\n## Interrupts (the suite's cases)\n")
    cases = list(_module("test_interrupts").CASES)
    if remote:
        cases += _module("test_interrupts_remote").CASES
    print(table(cases))
    print(f"\n{totals(cases)}")
    if not full:
        return 0
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_interrupts

    print()
    docker = [] if remote else ["--docker", "0", "--docker-kill", "0"]
    return int(bench_interrupts.main(docker))


if __name__ == "__main__":
    raise SystemExit(main())
