#!/usr/bin/env bash
# Command 2 of the README (and exactly what CI runs): install everything the tests need, then
# lint, type-check and run the plugin's own test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/python -m ruff check pytest_ppsweep tests test_matrix benchmarks
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest tests "$@"
