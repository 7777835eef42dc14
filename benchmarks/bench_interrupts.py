"""Interrupts at seeded random moments, the issue's full counts (issue 16, point 4).

Runs the cases of tests/support/interrupts.py one after the other and prints the "Interrupts"
table of docs/RELIABILITY.md (moment, phase seen, signal, backend, leftovers, rounds
present/expected, resumed OK):

* ``--emulator N`` Ctrl-C (SIGINT to pytest's process group) / SIGTERM cases on the emulator
  (default 20), spread over boot, round, log scan, teardown and report;
* ``--kill N`` SIGKILL of pytest on the emulator, each followed by ``--ppsweep-resume``
  (default 10);
* ``--docker N`` Ctrl-C / SIGTERM cases on Docker over SSH (default 5) and ``--docker-kill N``
  SIGKILL + resume there (default 1): the namespace hosts of scripts/provision_test_hosts.sh,
  provisioned here (root only; ``--docker 0 --docker-kill 0`` skips them), under an exclusive
  ``flock`` of ``/tmp/ppsweep-remote.lock`` (``$PPSWEEP_REMOTE_LOCK``) while they are used, so
  runs that share the hosts take turns.

Every case is resumed afterwards (``--no-resume-all``: only the SIGKILL ones), so the table
shows that the resumed run completes the rest after any interrupt. Exit status 1 when a case
left something or lost or duplicated a round.

    PYTHONPATH=. python benchmarks/bench_interrupts.py [--seed 16] [--emulator 20] [--kill 10]
        [--docker 5] [--docker-kill 1] [--smoke]

``--smoke``: 1 Ctrl-C/SIGTERM and 1 SIGKILL + resume case on the emulator and none on Docker,
unless the counts are given too (the smoke test adds ``--docker-kill 1`` where the test hosts
are up).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from benchkit.results import add_smoke, goal, info, print_results  # noqa: E402
from support import interrupts  # noqa: E402
from support.interrupts import Case, moments, run_cases  # noqa: E402


def emulator_cases(seed: int, signalled: int, killed: int, root: Path,
                   resume_all: bool = True) -> list[Case]:
    """``signalled`` Ctrl-C/SIGTERM and ``killed`` SIGKILL + resume cases on the emulator."""
    backend = interrupts.local_backend()
    chosen = moments(seed, signalled)
    chosen += moments(seed + 1, killed, signals=("SIGKILL",), start=signalled)
    return run_cases(backend, chosen, root, resume_all=resume_all)


def docker_cases(seed: int, signalled: int, killed: int, root: Path, start: int,
                 resume_all: bool = True) -> tuple[list[Case], list[str]]:
    """The Docker-over-SSH cases on freshly provisioned namespace hosts, and what is left on
    any host afterwards (every container and labelled process, of any run)."""
    from support.remote import IMAGE, TestHosts, leftovers, run_script

    if os.geteuid() != 0:
        raise SystemExit("--docker needs root (network namespaces with sshd and dockerd); "
                         "use --docker 0 --docker-kill 0")
    lock_path = os.environ.get("PPSWEEP_REMOTE_LOCK", "/tmp/ppsweep-remote.lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        run_script("provision_test_hosts.sh", "--docker")
        run_script("build_sim_image.sh")
        hosts = TestHosts.load()
        try:
            backend = interrupts.docker_backend(hosts, IMAGE)
            chosen = moments(seed + 2, signalled, start=start)
            chosen += moments(seed + 3, killed, signals=("SIGKILL",), start=start + signalled)
            cases = run_cases(backend, chosen, root, resume_all=resume_all)
            return cases, leftovers(hosts)
        finally:
            if not os.environ.get("PPSWEEP_KEEP_TEST_HOSTS"):
                run_script("teardown_test_hosts.sh")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=16)
    counts = {  # option: (full run, smoke), help
        "emulator": ((20, 1), "Ctrl-C/SIGTERM cases (emulator)"),
        "kill": ((10, 1), "SIGKILL + resume cases (emulator)"),
        "docker": ((5, 0), "Ctrl-C/SIGTERM cases (docker/ssh)"),
        "docker_kill": ((1, 0), "SIGKILL + resume (docker/ssh)"),
    }
    for name, ((full, smoke), text) in counts.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                        help=f"{text}; default {full}, {smoke} with --smoke")
    ap.add_argument("--no-resume-all", action="store_true",
                    help="resume only the SIGKILL cases")
    add_smoke(ap, "1 + 1 emulator cases, no Docker")
    args = ap.parse_args(argv)
    for name, ((full, smoke), _text) in counts.items():
        if getattr(args, name) is None:
            setattr(args, name, smoke if args.smoke else full)
    t0 = time.monotonic()
    resume_all = not args.no_resume_all
    with tempfile.TemporaryDirectory(prefix="ppsweep-intr-") as tmp:
        cases = emulator_cases(args.seed, args.emulator, args.kill, Path(tmp) / "emu",
                               resume_all)
        host_left: list[str] = []
        if args.docker or args.docker_kill:
            more, host_left = docker_cases(args.seed, args.docker, args.docker_kill,
                                           Path(tmp) / "docker", len(cases), resume_all)
            cases += more
    print(f"## Interrupts (seed {args.seed}; python benchmarks/bench_interrupts.py "
          f"--seed {args.seed} --emulator {args.emulator} --kill {args.kill} "
          f"--docker {args.docker} --docker-kill {args.docker_kill})\n")
    print(interrupts.table(cases))
    print()
    print(interrupts.totals(cases))
    if args.docker or args.docker_kill:
        print(f"left on the namespace hosts after the docker cases (any run): "
              f"{len(host_left)}" + "".join(f"\n  - {x}" for x in host_left))
    print(f"wall time: {time.monotonic() - t0:.0f} s")
    bad = [c for c in cases if not c.ok]
    for c in bad:
        print(f"\ncase {c.moment.index} ({c.moment.describe()}, {c.moment.signal}, "
              f"{c.backend}):\n{c.output[-3000:]}")
    figures = [goal("interrupted cases clean (nothing left, every round once, resumed)",
                    f"{len(cases) - len(bad)}/{len(cases)}", "all", not bad)]
    if args.docker or args.docker_kill:
        figures.append(goal("left on the namespace hosts after the docker cases",
                            str(len(host_left)), "0", not host_left))
    figures.append(info("interrupts wall time", f"{time.monotonic() - t0:.0f} s"))
    print_results(figures)
    return 1 if bad or host_left else 0


if __name__ == "__main__":
    raise SystemExit(main())
