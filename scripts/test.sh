#!/usr/bin/env bash
# Command 2 of the README (and exactly what CI runs): install everything the tests need, then
# lint, type-check and run the plugin's own test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
# Engines and tools the tests drive for real: Debian's chromium (report in a real browser), tmux
# (the live progress in a real terminal) and SGLang 0.5.23 for CPU with tiny models (cached in
# ~/.cache/pytest-ppsweep between runs).
bash scripts/install_browser.sh
bash scripts/install_tmux.sh
# Debian's Slurm and munge: the Slurm tests start slurmctld and one slurmd per namespace node.
bash scripts/install_slurm.sh
bash scripts/provision_sglang_cpu.sh
bash scripts/reserve_test_ports.sh
.venv/bin/python -m ruff check pytest_ppsweep tests test_matrix benchmarks tools
.venv/bin/python -m mypy
# The suite starts a few hundred pytest processes (a sweep is a pytest run). pytest rewrites the
# asserts of every module of a pytest11 plugin (this package) on import and caches the result as
# bytecode; with PYTHONDONTWRITEBYTECODE set (as on CI machines) nothing is cached and every run
# parses and compiles the whole package again (~0.5 s of CPU a run). Hypothesis' pytest plugin
# imports hypothesis at every run's end (~0.4 s); the fuzz tests use @given, which needs no plugin.
unset PYTHONDONTWRITEBYTECODE
export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -p no:hypothesispytest"
# -rfEs: every failure, error and skip is listed with its reason at the very end of the output, where
# a CI log's tail shows it (a skip must never pass unseen; a failure's name must not scroll away).
exec .venv/bin/python -m pytest tests -rfEs --durations=30 "$@"
