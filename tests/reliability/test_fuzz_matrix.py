"""Fuzzed sweep files: every generated file, valid or broken, gives a Sweep or a MatrixError
that names the file and a key (or the TOML line), never another exception and never a launch.

Deterministic (``derandomize=True``): CI sees the same ≥ 1,000 files on every run. The kinds and
outcomes are counted into ``OUTCOMES`` and printed by ``tools/reliability_tables.py``.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.tomltext import dumps

from pytest_ppsweep.gate.comparison import ThresholdError, parse_thresholds
from pytest_ppsweep.matrix import MatrixError, Sweep, load
from pytest_ppsweep.matrix.kinds import CLUSTER_KEYS
from pytest_ppsweep.matrix.schema import (
    SWEEP_KEYS,
    WORKLOAD_KEYS,
)
from pytest_ppsweep.service.logscan import LogScanner

# scripts/test.sh turns Hypothesis' pytest plugin off (it costs every nested sweep run ~0.4 s), so
# Hypothesis believes it is still being imported and warns "Slow code in plugin" on every strategy
# (441 warnings a suite run, which pushed a failure's name out of the CI log's tail). The strategies
# here are built inside the tests on purpose; the warning says nothing about them.
pytestmark = pytest.mark.filterwarnings("ignore:Slow code in plugin")

EXAMPLES_PER_KIND = 125  # 10 kinds × 125 = 1,250 files
OUTCOMES: Counter[tuple[str, str]] = Counter()


def base() -> dict[str, Any]:
    return {
        "sweep": {"name": "fuzz", "model_path": "/m", "ep_cap": 1, "baseline": "pp1",
                  "thresholds": ["input_tps:-3%"], "fatal_patterns": ["boom"]},
        "server": {"chunked_prefill_size": 8192, "disable_radix_cache": True},
        "env": {"NCCL_DEBUG": "INFO"},
        "configs": [{"pp": 1, "tp": 2}, {"pp": 2, "tp": 1, "env": {"A": "1"}}],
        "workload": {"input_len": 16, "output_len": 1, "concurrency": [1, 2],
                     "num_requests": 2, "repeats": 1, "request_timeout_s": 5.0},
        "clusters": {"local": {"kind": "local", "hosts": ["127.0.0.1", "127.0.0.2"],
                               "gpus_per_node": 1, "server_module": "pytest_ppsweep.sim",
                               "port": 31000, "dist_init_port": 21000,
                               "env": {"X": "y"}}},
    }


# Where a value may go: (table path, key); "configs" means the first [[configs]].
SLOTS: list[tuple[tuple[str | int, ...], str]] = (
    [(("sweep",), k) for k in SWEEP_KEYS]
    + [(("workload",), k) for k in WORKLOAD_KEYS]
    + [(("clusters", "local"), k) for k in CLUSTER_KEYS]
    + [(("configs", 0), k) for k in ("pp", "tp", "ep", "server", "env")]
    + [(("server",), "chunked_prefill_size"), (("env",), "NCCL_DEBUG"), ((), "sweep"),
       ((), "workload"), ((), "configs"), ((), "clusters"), ((), "server"), ((), "env")]
)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
SCALAR = st.one_of(
    st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), TEXT,
)
ANY_VALUE = st.recursive(
    SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                    st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6,
)
HUGE = st.one_of(
    st.integers(min_value=2**63, max_value=2**200),
    st.integers(min_value=1, max_value=3000).map(lambda k: 16**k * 7),  # up to 3,000 hex digits
    st.integers(max_value=-(2**63)),
    st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 5e-324]),
)


def _at(doc: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    node: Any = doc
    for p in path:
        node = node[p]
    return node


def _set(doc: dict[str, Any], slot: tuple[tuple[str | int, ...], str], v: Any) -> None:
    path, k = slot
    node = _at(doc, path)
    node[k] = v


@st.composite
def files(draw: st.DrawFn, kind: str) -> tuple[str, bytes]:
    doc = base()
    if kind == "valid":  # plausible variations of a good file
        doc["workload"]["concurrency"] = draw(st.lists(st.integers(1, 64), min_size=1,
                                                       max_size=4, unique=True))
        doc["server"].update(draw(st.dictionaries(
            st.from_regex(r"[a-z][a-z_]{0,15}", fullmatch=True).filter(
                lambda s: s not in ("host", "port", "nnodes")),
            st.one_of(st.booleans(), st.integers(0, 10**6), TEXT), max_size=3)))
        doc["sweep"]["boot_timeout_s"] = draw(st.floats(0.01, 1e6))
        return "valid", dumps(doc).encode()
    if kind == "wrong_type":
        slot = draw(st.sampled_from(SLOTS))
        _set(doc, slot, draw(ANY_VALUE))
        return kind, dumps(doc).encode()
    if kind == "missing":
        slot = draw(st.sampled_from(SLOTS))
        path, k = slot
        _at(doc, path).pop(k, None)
        return kind, dumps(doc).encode()
    if kind == "huge_number":
        slots = [s for s in SLOTS if s[1] in ("pp", "tp", "ep", "port", "gpus_per_node",
                                               "ep_cap", "min_repeats", "boot_timeout_s",
                                               "spread_threshold", "chunked_prefill_size")
                 or s[0] == ("workload",)]
        _set(doc, draw(st.sampled_from(slots)), draw(HUGE))
        return kind, dumps(doc).encode()
    if kind == "unicode":
        where = draw(st.sampled_from(["server_key", "env_key", "env_value", "cluster_name",
                                      "host", "model_path", "name", "baseline", "pattern"]))
        s = draw(st.text(st.characters(exclude_categories=("Cs",)), min_size=0, max_size=20))
        if where == "server_key":
            doc["server"][s] = "v"
        elif where == "env_key":
            doc["env"][s] = "v"
        elif where == "env_value":
            doc["env"]["K"] = s
        elif where == "cluster_name":
            doc["clusters"] = {s: doc["clusters"]["local"]}
        elif where == "host":
            doc["clusters"]["local"]["hosts"] = [s, "127.0.0.2"]
        elif where == "pattern":
            doc["sweep"]["fatal_patterns"] = [s]
        else:
            doc["sweep"][where] = s
        return kind, dumps(doc).encode()
    if kind == "unknown_key":
        path = draw(st.sampled_from([(), ("sweep",), ("workload",), ("clusters", "local"),
                                     ("configs", 0)]))
        _at(doc, path)[draw(TEXT)] = draw(SCALAR)
        return kind, dumps(doc).encode()
    text = dumps(doc)
    lines = text.splitlines()
    if kind == "duplicate_key":  # tomllib refuses these; a dict cannot hold them
        i = draw(st.sampled_from([n for n, line in enumerate(lines) if " = " in line]))
        lines.insert(i + draw(st.integers(0, 2)), lines[i])
        return kind, "\n".join(lines).encode()
    if kind == "deep_nesting":
        depth = draw(st.one_of(st.integers(1, 50), st.integers(500, 5000)))
        open_, close = draw(st.sampled_from([("[", "]"), ("{a = ", "}")]))
        slot = draw(st.sampled_from(["input_len", "concurrency", "name"]))
        nested = open_ * depth + "1" + close * depth
        lines = [f"{slot} = {nested}" if line.startswith(f'"{slot}" = ') else line
                 for line in lines]
        return kind, "\n".join(lines).encode()
    # raw: the text cut short, bytes changed, or not UTF-8 at all
    data = bytearray(text.encode())
    op = draw(st.sampled_from(["truncate", "flip", "latin1", "nul", "decimal"]))
    if op == "decimal":  # more digits than int() converts (4,300)
        digits = "9" * draw(st.integers(4000, 6000))
        data = bytearray(text.replace('"input_len" = 16', f'"input_len" = {digits}').encode())
    elif op == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif op == "flip":
        for _ in range(draw(st.integers(1, 5))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif op == "latin1":
        data = bytearray("# café ÿ\n".encode("latin-1")) + data
    else:
        data[draw(st.integers(0, len(data) - 1))] = 0
    return "raw", bytes(data)


KINDS = ["valid", "wrong_type", "missing", "huge_number", "unicode", "unknown_key",
         "duplicate_key", "deep_nesting", "raw", "garbage"]
# Not a sweep at all: random bytes, or TOML-ish tokens in random order.
GARBAGE = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(["[", "]", "[[", "]]", "=", '"', "'", "{", "}", ",", "\n", "a",
                              "sweep", "configs", "1", "0x", "inf", "#", "\\", '"""', "."]),
             max_size=60).map(lambda t: " ".join(t).encode()),
)


def check_one(path: Path, data: bytes) -> str:
    """One file through the parser and the options-level checks: "valid" or "MatrixError"."""
    path.write_bytes(data)
    try:
        sweep = load(path)
    except MatrixError as exc:
        msg = str(exc)
        assert str(path) in msg, msg
        assert "key '" in msg or "line" in msg or "unknown key" in msg, msg
        return "MatrixError"
    assert isinstance(sweep, Sweep)
    LogScanner(sweep.fatal_patterns)  # what a Service compiles at boot
    try:  # what options.thresholds does with [sweep] thresholds
        parse_thresholds(sweep.thresholds)
    except ThresholdError:
        return "valid, threshold refused"
    return "valid"


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError(f"the parser started a process: {a}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.mark.parametrize("kind", KINDS)
def test_fuzzed_sweep_files(kind: str, tmp_path: Path, no_launch: None) -> None:
    path = tmp_path / f"fuzz-{kind}.toml"

    @settings(max_examples=EXAMPLES_PER_KIND, deadline=None, derandomize=True,
              database=None, suppress_health_check=list(HealthCheck))
    @given(GARBAGE.map(lambda b: ("garbage", b)) if kind == "garbage" else files(kind))
    def run(case: tuple[str, bytes]) -> None:
        _, data = case
        OUTCOMES[(kind, check_one(path, data))] += 1

    run()


def test_valid_base_is_valid(tmp_path: Path) -> None:
    assert check_one(tmp_path / "base.toml", dumps(base()).encode()) == "valid"


def test_duplicate_key_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "dup.toml"
    path.write_text(dumps(base()) + '\n[sweep]\nname = "again"\n')
    with pytest.raises(MatrixError, match="line") as info:
        load(path)
    assert str(path) in str(info.value)
    assert "table [sweep] is declared twice" in str(info.value)
    path.write_text(dumps(base()).replace('"repeats" = 1', '"repeats" = 1\n"repeats" = 2'))
    with pytest.raises(MatrixError, match=r"key 'workload.repeats' is given twice \(lines"):
        load(path)


def test_outcome_counts() -> None:
    """Runs after the fuzz (same module, file order): every kind ran ≥ 50 files (most 125),
    ≥ 1,000 in all; the counts are what docs/RELIABILITY.md shows."""
    per_kind = Counter(k for k, _ in OUTCOMES.elements())
    if set(per_kind) != set(KINDS):
        pytest.skip("run with the fuzz tests of this module")
    assert all(n >= 50 for n in per_kind.values()), per_kind  # "missing": 55 slots, all
    assert sum(per_kind.values()) >= 1000
    print("\nfuzz outcomes:", dict(sorted(OUTCOMES.items())))


def test_unreadable_paths_are_matrix_errors(tmp_path: Path) -> None:
    with pytest.raises(MatrixError, match="cannot read the sweep file") as info:
        load(tmp_path)  # a folder
    assert str(tmp_path) in str(info.value)
    with pytest.raises(MatrixError, match="not found"):
        load(tmp_path / "nowhere.toml")
