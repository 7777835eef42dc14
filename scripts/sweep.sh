#!/usr/bin/env bash
# Command 1 of the README: install pytest-ppsweep into .venv and run the sweep of
# test_matrix/ppsweep.toml (default: the emulated 4-node cluster). Extra arguments go to pytest,
# e.g. `bash scripts/sweep.sh -k pp8` or `bash scripts/sweep.sh --ppsweep-cluster pro6000`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/python -m pytest test_matrix "$@"
