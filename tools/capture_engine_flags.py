"""Capture an engine version's server flags from its real parser, for the dry run's offline check.

The dry run opens no connection, so on a cluster whose engine runs elsewhere (over SSH, in a
Slurm step) it checks the sweep's server flags against a list kept in the project:
``pytest_ppsweep/engine/flags/<engine>-<version>.json``, the argument parser of that engine
version dumped by the flag probe the preflight runs on node 0 (engine/argparse_dump.py), in an
interpreter that has the version installed::

    python tools/capture_engine_flags.py --engine sglang \\
        --python ~/.cache/pytest-ppsweep/venv-sglang-0.5.23/bin/python

The version is read from that interpreter's installed distribution (the engine's
``version_distribution``); the file is rewritten whole (sorted, stable: a refresh that changes
nothing leaves no diff; choices sorted, as some come from a set).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from pytest_ppsweep.cluster.serverflags import CAPTURED_DIR, captured_path
from pytest_ppsweep.engine.argparse_dump import DUMPED, MARKER
from pytest_ppsweep.engine.engines import engine_of


def capture(engine: str, python: str, out_dir: Path = CAPTURED_DIR) -> Path:
    """Run the engine's flag probe with ``python`` and write its flag list; the file's path."""
    spec = engine_of(engine)
    version = subprocess.run(
        [python, "-c", "import importlib.metadata as m, sys; "
         "print(m.version(sys.argv[1]))", spec.version_distribution],
        capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    done = subprocess.run(spec.flags_argv(python, spec.server_module), capture_output=True,
                          text=True, timeout=600, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARKER)), None)
    if done.returncode != DUMPED or line is None:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise SystemExit(f"{python}: {spec.server_module} printed no argument list "
                         f"(exit {done.returncode}): {tail}")
    actions = sorted(json.loads(line[len(MARKER):]), key=lambda a: a["flags"])
    for act in actions:  # some choices come from a set: sorted, so that a refresh is stable
        if act.get("choices") is not None:
            act["choices"] = sorted(act["choices"])
    path = captured_path(engine, version, out_dir)
    path.write_text(json.dumps({
        "engine": engine, "version": version, "module": spec.server_module,
        "captured_by": "tools/capture_engine_flags.py (engine/argparse_dump.py's probe)",
        "actions": actions}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="sglang", help="the engine's name (engine/engines.py)")
    parser.add_argument("--python", required=True,
                        help="an interpreter with the engine version installed")
    parser.add_argument("--out", type=Path, default=CAPTURED_DIR, help="where the list goes")
    args = parser.parse_args(argv)
    print(capture(args.engine, args.python, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
