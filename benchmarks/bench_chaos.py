"""The whole chaos matrix: faults × backends → detected / verdict / leftovers / seconds to detect.

Every fault of ``tests/support/chaos.py`` (each emulator fault of sim/launch/faults.py, SIGKILL
and SIGSTOP of a rank, a rank killed mid-round, every SSH connection of a node cut while its log
streams, a node's dockerd restarted during a layout, the run folder's disk full, a port already
taken) on each backend where it has a meaning: the local emulator (127.0.46.1-2), real SGLang
0.5.23 on CPU (PP2, 127.0.46.21-22; skipped with a note when not provisioned), SSH processes
and Docker over SSH on the namespace hosts of scripts/provision_test_hosts.sh (root only;
provisioned here, and torn down at the end unless PPSWEEP_KEEP_TEST_HOSTS=1). Faults that do
not end a layout share one boot. Prints the Markdown table of docs/RELIABILITY.md and, with
``--json``, every cell's details. Exit status 1 when a cell misses its expected verdict, its
evidence, or leaves anything behind.

    python benchmarks/bench_chaos.py [--backend emulator,sglang,ssh,docker] [--fault F,...]
        [--smoke]

``--smoke``: one fault (``nccl_init``) on the emulator, unless ``--backend``/``--fault`` are given
too (the smoke test adds ``--backend emulator,docker`` where the test hosts are up).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from benchkit.results import add_smoke, goal, info, print_results  # noqa: E402
from support.chaos import (  # noqa: E402
    BACKENDS,
    FAULTS,
    Backend,
    Emulator,
    RealSglang,
    Remote,
    as_json,
    from_json,
    run_matrix,
    table,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default=None, help=f"default: {','.join(BACKENDS)}")
    ap.add_argument("--fault", default=None, help=f"default: {','.join(FAULTS)}")
    add_smoke(ap, "nccl_init on the emulator")
    ap.add_argument("--json", type=Path, default=None, help="write every cell's details here")
    ap.add_argument("--table-from", type=Path, nargs="+", default=None, metavar="JSON",
                    help="no run: print the table of cells that earlier --json runs wrote "
                         "(e.g. the local and the remote backends, run apart)")
    args = ap.parse_args()
    if args.table_from:
        cells = {(r.fault, r.backend): r for path in args.table_from for r in from_json(path)}
        print(table(cells))
        good = sum(r.ok for r in cells.values())
        print_results([goal("chaos cells with their verdict, evidence and nothing left",
                            f"{good}/{len(cells)}", "all", good == len(cells))])
        return 0 if good == len(cells) else 1
    wanted = (args.backend or ("emulator" if args.smoke else ",".join(BACKENDS))).split(",")
    faults = (args.fault or ("nccl_init" if args.smoke else ",".join(FAULTS))).split(",")
    unknown = sorted(set(wanted) - set(BACKENDS)) + sorted(set(faults) - set(FAULTS))
    if unknown:
        ap.error(f"unknown backend or fault: {', '.join(unknown)}")
    not_run: dict[str, str] = {}
    t0 = time.monotonic()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        work = Path(tmp)
        backends: list[Backend] = []
        if "emulator" in wanted:
            backends.append(Emulator(work / "emulator"))
        if "sglang" in wanted:
            from support.real import ProvisionImpossible, provision

            try:
                backends.append(RealSglang(work / "sglang", provision()))
            except (ProvisionImpossible, RuntimeError) as exc:
                not_run["sglang"] = f"not provisioned: {str(exc).splitlines()[0][:80]}"
        hosts = None
        if {"ssh", "docker"} & set(wanted):
            if os.geteuid() != 0:
                for b in ("ssh", "docker"):
                    not_run[b] = "needs root (namespace hosts)"
            else:
                from support.remote import TestHosts, run_script

                run_script("provision_test_hosts.sh", "--docker")
                run_script("build_sim_image.sh")
                hosts = TestHosts.load()
                if "ssh" in wanted:
                    backends.append(Remote(work / "ssh", hosts, "process"))
                if "docker" in wanted:
                    backends.append(Remote(work / "docker", hosts, "docker"))
        try:
            results = run_matrix(backends, faults, say=lambda m: print(m, flush=True))
        finally:
            if hosts is not None and not os.environ.get("PPSWEEP_KEEP_TEST_HOSTS"):
                from support.remote import run_script

                run_script("teardown_test_hosts.sh")
    print()
    print(table(results, [b for b in BACKENDS if b in wanted], faults, not_run))
    misses = [r for r in results.values() if not r.ok]
    print(f"\n{len(results)} cells run in {time.monotonic() - t0:.0f} s, {len(misses)} missed; "
          f"cores: {os.cpu_count()}, load average (1 min) {load0[0]:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    for r in misses:
        print(f"MISS {r.fault} on {r.backend}: verdict {r.verdict!r} (expected {r.expected!r}), "
              f"evidence {r.evidence[:200]!r}, leftovers {r.leftovers[:3]}, {r.note}")
    if args.json:
        args.json.write_text(as_json(results))
    print_results([
        goal("chaos cells with their verdict, evidence and nothing left",
             f"{len(results) - len(misses)}/{len(results)}", "all", not misses),
        info("chaos backends run", ", ".join(b for b in BACKENDS if b in wanted
                                              and b not in not_run) or "none"),
        info("chaos wall time", f"{time.monotonic() - t0:.0f} s, load average (1 min) "
             f"{load0[0]:.2f} → {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"),
    ])
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
