"""matrix/keydocs.py says every sweep-file key's type, default and meaning; these check it
against the parser: each key of each key list has exactly its KeyDoc, and every default given as
a value and every bound of a type is the one the parser uses, recorded from its typed reads
(Reader) while it parses the shipped sweeps and a sweep that leaves every optional key out."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from support.paths import DATA, REPO

from pytest_ppsweep.matrix import keydocs, schema
from pytest_ppsweep.matrix.parse import load

# every shipped sweep (cluster.toml is the clusters they extend, no sweep of its own)
SHIPPED = sorted(p for p in (REPO / "test_matrix").glob("*.toml") if p.name != "cluster.toml")
# the cluster pool a shipped sweep's layouts need (its own comment says so)
POOL = {"vllm_cpu.toml": "cpu1,cpu2"}

# Every optional table present and every optional key left out: the parser's defaults are read.
DEFAULTS_SWEEP = """
[sweep]
model_path = "/m"
[[configs]]
pp = 1
tp = 2
[[configs]]
[configs.prefill]
tp = 1
[configs.decode]
tp = 1
[router]
[workload]
input_len = 8
output_len = 4
num_requests = 4
concurrency = [1]
[workloads.plain.slo]
ttft_p50_s = 1.0
min = 1.0
max = 2.0
[workloads.shared]
type = "shared_prefix"
prefix_len = 2
prefix_share = 0.5
[workloads.trace]
type = "trace"
path = "small.jsonl"
[compare]
[profile]
[comm]
[correctness]
[accuracy]
tasks = "tasks.jsonl"
[[expect]]
failure = "oom"
reason = "why"
[clusters.c]
kind = "local"
hosts = ["127.0.0.1", "127.0.0.2"]
gpus_per_node = 1
[clusters.s]
kind = "slurm"
nodes = 1
gpus_per_node = 1
"""

_READS = ("text", "choice", "flag", "integer", "number", "str_list", "int_list")


@dataclass(frozen=True)
class Read:
    """One typed read of a key: the table's dotted name, the key, whether it was absent (its
    default used), the default, whether it was required, and the bounds."""

    where: str
    key: str
    absent: bool
    default: Any
    required: bool
    minimum: Any
    maximum: Any


def _recording(monkeypatch: pytest.MonkeyPatch, reads: list[Read]) -> None:
    """Reader's typed reads, each recorded before it runs."""
    for name in _READS:
        method: Callable[..., Any] = getattr(schema.Reader, name)

        def wrapped(self: schema.Reader, key: str, *args: Any, _m: Any = method,
                    _n: str = name, **kw: Any) -> Any:
            default = kw.get("default", [] if _n == "int_list" else None)
            if _n == "str_list" and args:
                default = args[0]
            reads.append(Read(self.where, key, key not in self.data, default,
                              bool(kw.get("required", False)), kw.get("minimum"),
                              kw.get("maximum")))
            return _m(self, key, *args, **kw)

        monkeypatch.setattr(schema.Reader, name, wrapped)


def _pattern(where: str) -> re.Pattern[str]:
    return re.compile(re.escape(where).replace(r"\*", r"[^.\[\]]+"))


def _doc(read: Read) -> keydocs.KeyDoc | None:
    for table in keydocs.tables():
        if read.key in table.keys and any(_pattern(w).fullmatch(read.where)
                                          for w in table.where):
            return table.docs[read.key]
    return None


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> list[Read]:
    folder = tmp_path_factory.mktemp("defaults")
    (folder / "small.jsonl").write_text((DATA / "mooncake" / "small.jsonl").read_text())
    (folder / "tasks.jsonl").write_text((REPO / "test_matrix" / "cpu_tasks.jsonl").read_text())
    (folder / "ppsweep.toml").write_text(DEFAULTS_SWEEP)
    out: list[Read] = []
    with pytest.MonkeyPatch.context() as mp:
        _recording(mp, out)
        for path in [*SHIPPED, folder / "ppsweep.toml"]:
            load(path, cluster=POOL.get(path.name))
    return out


def test_every_key_of_every_table_has_exactly_its_line() -> None:
    assert keydocs.problems() == []


def test_a_key_added_without_its_line_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "SWEEP_KEYS", (*schema.SWEEP_KEYS, "brand_new_key"))
    assert keydocs.problems() == [
        "[sweep]: key 'brand_new_key' has no KeyDoc (matrix/keydocs.py)"]


def test_every_read_key_is_a_documented_key_of_its_table(reads: list[Read]) -> None:
    assert reads
    assert sorted({(r.where, r.key) for r in reads if _doc(r) is None}) == []


def test_each_documented_default_is_the_parsers(reads: list[Read]) -> None:
    wrong = []
    for r in reads:
        doc = _doc(r)
        assert doc is not None
        if r.required and not isinstance(doc.default, keydocs.Computed):
            wrong.append(f"{r.where}.{r.key}: read as required, documented {doc.default!r}")
        if r.absent and not r.required and not isinstance(doc.default, keydocs.Computed) and \
                keydocs.literal(r.default) != keydocs.literal(doc.default):
            wrong.append(f"{r.where}.{r.key}: parser's default {r.default!r}, documented "
                         f"{doc.default!r}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_every_documented_default_value_was_checked(reads: list[Read]) -> None:
    """The defaults sweep leaves every key with a value default out, so the check above saw
    each of them."""
    seen = {(id(_doc(r)), r.key) for r in reads if r.absent}
    unseen = [f"{t.title} {k}" for t in keydocs.tables() for k, d in t.docs.items()
              if not isinstance(d.default, keydocs.Computed) and (id(d), k) not in seen]
    assert unseen == []


def test_each_bound_the_parser_enforces_is_in_the_documented_type(reads: list[Read]) -> None:
    wrong = []
    for r in reads:
        doc = _doc(r)
        assert doc is not None
        if r.minimum is not None:
            low = keydocs.literal(r.minimum)
            if f"≥ {low}" not in doc.type and f"> {low}" not in doc.type:
                wrong.append(f"{r.where}.{r.key}: minimum {low}, documented {doc.type!r}")
        stated = re.search(r"≤ ([0-9.]+)", doc.type)
        if stated and (r.maximum is None or stated.group(1) != keydocs.literal(r.maximum)):
            wrong.append(f"{r.where}.{r.key}: maximum {r.maximum}, documented {doc.type!r}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_the_reference_shows_each_key_with_its_type_default_and_meaning() -> None:
    doc = keydocs.SWEEP_DOCS["boot_timeout_s"]
    text = (REPO / "docs" / "REFERENCE.md").read_text(encoding="utf-8")
    assert f"| `boot_timeout_s` | {doc.type} | `1800` | {doc.meaning} |" in text
