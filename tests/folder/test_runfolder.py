"""The run folder as one schema: its names live in folder/runfolder.py alone, a new folder says
its format version, and every stored run folder of tests/data (older formats too) reads through
RunFolder."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.paths import REPO

import pytest_ppsweep
from pytest_ppsweep.folder import runfolder
from pytest_ppsweep.folder.runfolder import (
    ADAPTIVE_SKIPPED,
    CONFIG_COLUMNS,
    FORMAT_VERSION,
    FORMAT_VERSION_KEY,
    RESULT_COLUMNS,
    SELECTED,
    SLURM_JOBS,
    UNVERSIONED,
    CompareKey,
    OwnerKey,
    RunFolder,
    RunJson,
    RunKey,
    RunOwner,
    RunStore,
    SourceKey,
    engine_facts,
)
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.results.aggregate import load_run
from pytest_ppsweep.results.pipeline import analyse

PACKAGE = Path(pytest_ppsweep.__file__).parent
OWNER = PACKAGE / "folder" / "runfolder.py"
# every file name the schema owns: its constants that name a file
FILE_NAMES = sorted({v.rsplit("/", 1)[-1] for k, v in vars(runfolder).items()
                     if k.isupper() and isinstance(v, str)
                     and re.fullmatch(r"[\w.-]+/?[\w.-]*\.(csv|json|log|html)", v)})
STORED = sorted(p.parent.parent for p in (REPO / "tests" / "data").rglob("metadata/run.json"))


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def spelled(source: str, names: list[str]) -> list[tuple[int, str]]:
    """(line, literal) of each string literal of ``source`` that is a path to one of ``names``
    (the name alone, or ending in ``/<name>``); docstrings and prose (a literal with a space)
    say the name to a person and do not count."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and not re.search(r"\s", node.value)):
            text = node.value
            if any(text == n or text.endswith(f"/{n}") for n in names):
                found.append((node.lineno, text))
    return found


def test_the_schema_knows_the_files_of_the_readme() -> None:
    for name in ("results.csv", "configs.csv", "summary.csv", "comparisons.csv", "run.json",
                 "answers.json", "progress.log", "slo_probes.csv", "gate.csv", "benchmark.json",
                 "report.html", "comm.csv", "profile.csv"):
        assert name in FILE_NAMES


def test_no_other_module_spells_a_run_folder_file_name() -> None:
    offenders = [f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 if path != OWNER and "sim" not in path.relative_to(PACKAGE).parts[:1]
                 for line, text in spelled(path.read_text(encoding="utf-8"), FILE_NAMES)]
    assert offenders == []


def test_the_walk_finds_a_spelled_name() -> None:
    """The check above can fail: a path literal is found, prose and docstrings are not."""
    source = ('"""results.csv in a docstring."""\n'
              'A = "results.csv"\nB = "metadata/run.json"\nC = "no configs.csv row"\n')
    assert spelled(source, FILE_NAMES) == [(2, "results.csv"), (3, "metadata/run.json")]


def test_a_new_run_folder_says_its_format_version(tmp_path: Path) -> None:
    sweep = load(REPO / "test_matrix" / "cpu.toml")
    store = RunStore(tmp_path, "r-1")
    RunJson(store).create(sweep, tuple(sweep.clusters.values()), [c.id for c in sweep.configs])
    folder = RunFolder(store.dir)
    meta = folder.read_run_json()
    assert meta[FORMAT_VERSION_KEY] == FORMAT_VERSION
    assert folder.format_version() == FORMAT_VERSION
    assert folder.recorded_run_id() == "r-1"


def test_the_engine_and_its_version_read_from_every_format() -> None:
    """Format 3 names the engine and its version; format 2 wrote the version under SGLang's own
    key (the engine then is SGLang); format 1 may have neither."""
    assert engine_facts({RunKey.ENGINE: "sglang", RunKey.ENGINE_VERSION: "0.5.23"}) == (
        "sglang", "0.5.23")
    assert engine_facts({"sglang_version": "0.5.23", FORMAT_VERSION_KEY: 2}) == (
        "sglang", "0.5.23")
    assert engine_facts({}) == ("sglang", None)


def test_a_resumed_format_2_folder_keeps_its_engine_version(tmp_path: Path) -> None:
    """A run resumed into a folder of format 2 writes today's format with the version its boots
    learnt, moved to ``engine_version`` (the old key gone)."""
    sweep = load(REPO / "test_matrix" / "cpu.toml")
    store = RunStore(tmp_path, "r-2")
    store.write_json("metadata/run.json", {"run_id": "r-2", FORMAT_VERSION_KEY: 2,
                                           "sglang_version": "0.5.4"})
    RunJson(store).create(sweep, tuple(sweep.clusters.values()), [c.id for c in sweep.configs])
    meta = RunFolder(store.dir).read_run_json()
    assert meta[FORMAT_VERSION_KEY] == FORMAT_VERSION == 3
    assert (meta[RunKey.ENGINE], meta[RunKey.ENGINE_VERSION]) == ("sglang", "0.5.4")
    assert "sglang_version" not in meta


@pytest.mark.parametrize("path", STORED, ids=[p.name for p in STORED])
def test_every_stored_run_folder_reads_through_runfolder(path: Path) -> None:
    folder = RunFolder(path)
    assert folder.is_run()
    meta = folder.read_run_json()
    assert folder.format_version(meta) in range(UNVERSIONED, FORMAT_VERSION + 1)
    assert folder.recorded_run_id() == meta.get("run_id", path.name)
    rows = folder.result_rows()
    assert rows and all(set(r) <= set(RESULT_COLUMNS) for r in rows)
    configs = folder.config_rows()
    assert configs and all(set(r) <= set(CONFIG_COLUMNS) for r in configs.values())
    assert {r["config_id"] for r in rows} <= set(configs)
    run = load_run(path)
    assert len(run.results) == len(rows)
    _, summary, verdicts, answers = analyse(path)  # the whole pipeline reads it too
    assert {v.config_id for v in verdicts} <= set(configs) and summary.order and answers


def test_the_stored_folders_include_the_current_format_and_an_older_one() -> None:
    """tests/data keeps a folder of today's format (tests/data/runfolders), one of format 2
    (before run.json named the engine) and folders written before format_version (and before
    the decode columns)."""
    assert STORED
    assert any(RunFolder(p).format_version() == FORMAT_VERSION for p in STORED)
    assert any(RunFolder(p).format_version() == 2 for p in STORED)
    assert any(RunFolder(p).format_version() == UNVERSIONED for p in STORED)
    assert any("output_tokens_nominal" not in RunFolder(p).result_rows()[0] for p in STORED)


def test_run_json_records_the_selection_the_nodes_and_the_skips(tmp_path: Path) -> None:
    """The keys the session writes after the set-up and reads back (the selection, the slurm
    allocations, the adaptive sweep's skips) go through RunJson's typed writers and readers."""
    sweep = load(REPO / "test_matrix" / "cpu.toml")
    store = RunStore(tmp_path, "r-1")
    run_json = RunJson(store)
    run_json.create(sweep, tuple(sweep.clusters.values()), [c.id for c in sweep.configs])
    assert run_json.selected() is None and run_json.slurm_jobs() == {}
    run_json.selection({"pp2": {8, 2}, "pp1": {4}}, baseline_note="baseline pp4: not run")
    assert run_json.selected() == {"pp2": [2, 8], "pp1": [4]}
    meta = store.read_run_json()
    assert (meta["baseline_from"], meta["baseline_note"]) == (None, "baseline pp4: not run")
    run_json.selection({"pp2": {8}}, baseline_run="r-0", baseline_path="/r/r-0",
                       baseline_chosen="newest")
    assert store.read_run_json()["baseline_from"] == {"run_id": "r-0", "path": "/r/r-0",
                                                      "chosen": "newest"}
    run_json.nodes(["10.0.0.1", "10.0.0.2"], {"gpu": "4711"})
    assert run_json.slurm_jobs() == {"gpu": "4711"}
    assert store.read_run_json()["hosts"] == ["10.0.0.1", "10.0.0.2"]
    run_json.selection({"pp2": {8}, "pp1": {4}})
    run_json.drop_skipped({"pp1": "predicted"})
    assert run_json.selected() == {"pp2": [8]}
    assert run_json.adaptive_skipped() == {"pp1": "predicted"}


# run.json keys that more than their writer read: only folder/runfolder.py spells them
SHARED_KEYS = (SELECTED, ADAPTIVE_SKIPPED, SLURM_JOBS)


def key_reads(source: str, keys: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, source) of each ``x.get("key")``, ``x["key"]``, ``{"key": …}`` or
    ``x.update(key=…)`` (run.json's merge) of ``keys``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "setdefault", "pop") and node.args
                and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("update", "update_json")):
            key = next((k.arg for k in node.keywords if k.arg in keys), None)
        elif isinstance(node, ast.Dict):
            key = next((k.value for k in node.keys
                        if isinstance(k, ast.Constant) and k.value in keys), None)
        if key in keys:
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_the_walk_finds_a_spelled_key() -> None:
    source = ('a = raw.get("selected")\nb = meta["slurm_jobs"]\n'
              'c = run_json.update(adaptive_skipped=1)\nd = {"selected": 1}\n'
              'ok = raw.get(SELECTED)\nphase = "selected"\n'
              'meta = RunMeta(selected=None)\n')
    assert [line for line, _ in key_reads(source, SHARED_KEYS)] == [1, 2, 3, 4]


def test_no_other_module_spells_a_shared_run_json_key() -> None:
    offenders = [f"{path.relative_to(PACKAGE)}:{line}: {text}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 if path != OWNER and "sim" not in path.relative_to(PACKAGE).parts[:1]
                 for line, text in key_reads(path.read_text(encoding="utf-8"), SHARED_KEYS)]
    assert offenders == []


# -- every run.json key: read through RunKey, never spelled -------------------------------------

RUN_JSON_TYPE = "RunJsonDict"  # folder/runfolder.py: the type of run.json as read
RUN_JSON_ATTRS = ("run_json", "meta")  # RunData.run_json, FolderFiles.meta
RUN_JSON_READERS = ("read_run_json",)  # RunFolder.read_run_json


def _names(namespace: type) -> frozenset[str]:
    return frozenset(v for k, v in vars(namespace).items() if k.isupper())


# the objects run.json holds whose keys are named too: a value read from run.json by them
NESTED = {RunKey.COMPARE: _names(CompareKey), RunKey.OWNER: _names(OwnerKey),
          RunKey.BASELINE_FROM: _names(SourceKey)}


class _RunJsonScope(ast.NodeVisitor):
    """Which names of one function (or module) hold run.json: a parameter or variable typed
    RunJsonDict, or a variable assigned run.json (``x.run_json``, ``files.meta``,
    ``folder.read_run_json()``, a call to a function of the module that returns RunJsonDict,
    or either side of ``a if c else b`` / ``a or b`` of those); and which hold one of its
    objects with named keys (NESTED: ``x = meta.get(RunKey.OWNER)``), with those keys."""

    def __init__(self, returning: set[str]) -> None:
        self.returning = returning
        self.names: set[str] = set()
        self.nested: dict[str, frozenset[str]] = {}

    def nested_keys(self, node: ast.expr | None) -> frozenset[str]:
        """The keys of the run.json object ``node`` holds (empty: none of NESTED)."""
        if isinstance(node, ast.Name):
            return self.nested.get(node.id, frozenset())
        if isinstance(node, ast.IfExp):
            return self.nested_keys(node.body) | self.nested_keys(node.orelse)
        if isinstance(node, ast.BoolOp):
            return frozenset().union(*(self.nested_keys(v) for v in node.values))
        recv, key = None, None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and node.args):
            recv, key = node.func.value, node.args[0]
        elif isinstance(node, ast.Subscript):
            recv, key = node.value, node.slice
        if (isinstance(key, ast.Attribute) and isinstance(key.value, ast.Name)
                and key.value.id == "RunKey" and self.holds(recv)):
            return NESTED.get(getattr(RunKey, key.attr, ""), frozenset())
        return frozenset()

    def holds(self, node: ast.expr | None) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Attribute):
            return node.attr in RUN_JSON_ATTRS
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            return name in RUN_JSON_READERS or name in self.returning
        if isinstance(node, ast.IfExp):
            return self.holds(node.body) or self.holds(node.orelse)
        if isinstance(node, ast.BoolOp):
            return any(self.holds(v) for v in node.values)
        return False

    def learn(self, scope: ast.AST) -> None:
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            args = scope.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if arg.annotation is not None and RUN_JSON_TYPE in ast.unparse(arg.annotation):
                    self.names.add(arg.arg)
        for _ in range(2):  # twice: a name assigned from a name learnt below it
            for node in _own_nodes(scope):
                if isinstance(node, ast.Assign) and self.holds(node.value):
                    self.names.update(t.id for t in node.targets if isinstance(t, ast.Name))
                elif isinstance(node, ast.Assign) and self.nested_keys(node.value):
                    self.nested.update({t.id: self.nested_keys(node.value)
                                        for t in node.targets if isinstance(t, ast.Name)})
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (
                        RUN_JSON_TYPE in ast.unparse(node.annotation) or self.holds(node.value)):
                    self.names.add(node.target.id)


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope`` outside the functions and classes it defines."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def run_json_key_reads(source: str, keys: frozenset[str] = RunKey.all()
                       ) -> list[tuple[int, str]]:
    """(line, source) of each ``x.get("key")``, ``x["key"]`` (or setdefault, pop) of a run.json
    key spelled as a literal, where ``x`` holds run.json (:class:`_RunJsonScope`), or of a key
    of one of its NESTED objects on a value read from run.json by that key: the same literal
    on another dict (a CSV row, a point's facts, a manifest) does not count."""
    tree = ast.parse(source)
    returning = {f.name for f in ast.walk(tree)
                 if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.returns
                 is not None and RUN_JSON_TYPE in ast.unparse(f.returns)}
    found = []
    for scope in ast.walk(tree):
        if not isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        held = _RunJsonScope(returning)
        held.learn(scope)
        for node in _own_nodes(scope):
            recv, key = None, None
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("get", "setdefault", "pop") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                recv, key = node.func.value, node.args[0].value
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                recv, key = node.value, node.slice.value
            if (key in keys and held.holds(recv)) or key in held.nested_keys(recv):
                found.append((node.lineno, ast.unparse(node)[:80]))
    return sorted(found)


def test_the_run_json_walk_finds_a_spelled_key() -> None:
    """The check below can fail: a run.json key read with a literal from run.json (however it
    came) is found; the same literal on another dict, or through RunKey, is not."""
    source = (
        "def a(raw: RunJsonDict, row: dict[str, str]) -> None:\n"
        "    x = raw.get('workload')\n"                  # 2: a typed parameter
        "    y = row['workload']\n"                      # a CSV row: not run.json
        "    z = raw.get(RunKey.WORKLOAD)\n"             # named: fine
        "def b(data: RunData, files: FolderFiles) -> None:\n"
        "    s = data.run_json['sweep']\n"               # 6: RunData.run_json
        "    t = files.meta.get('gpu_hour_usd')\n"       # 7: FolderFiles.meta
        "    meta = RunFolder(d).read_run_json()\n"
        "    u = meta['order']\n"                        # 9: a variable assigned run.json
        "    raw = json.loads(text)\n"
        "    v = raw.get('sweep')\n"                     # a TOML/JSON of another file
        "    w = meta.get('not_a_key')\n"                # not a run.json key
        "def c() -> RunJsonDict:\n"
        "    return {}\n"
        "def d(p: Path) -> None:\n"
        "    raw = c() if p else None\n"
        "    return raw['run_status']\n"                 # 17: from a RunJsonDict function
        "def e(p: dict[str, Any]) -> None:\n"
        "    return p['axes']\n"                         # a point's facts
        "def f(raw: RunJsonDict, row: dict[str, str]) -> None:\n"
        "    owner = raw.get(RunKey.OWNER) or {}\n"
        "    a = owner['resume']\n"                      # 22: a key of run.json's owner
        "    b = raw.get(RunKey.COMPARE).get('alpha')\n"  # 23: of its compare
        "    c = owner.get(OwnerKey.PID)\n"              # named: fine
        "    d = row.get('pid')\n"                       # another dict's
        "    rule = raw.get(RunKey.WORKLOAD) or {}\n"
        "    e = rule.get('alpha')\n"                    # not an object of NESTED
    )
    assert [line for line, _ in run_json_key_reads(source)] == [2, 6, 7, 9, 17, 22, 23]


def test_no_other_module_reads_a_run_json_key_spelled_out() -> None:
    """run.json's keys are RunKey's names everywhere but its owner."""
    offenders = [f"{path.relative_to(PACKAGE)}:{line}: {text}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 if path != OWNER and "sim" not in path.relative_to(PACKAGE).parts[:1]
                 for line, text in run_json_key_reads(path.read_text(encoding="utf-8"))]
    assert offenders == []


@pytest.mark.parametrize("matrix", ["cpu.toml", "a2a.toml"])
def test_run_key_names_every_key_run_json_gets(tmp_path: Path, matrix: str) -> None:
    """RunKey is the whole schema: every key RunJson's writers put in run.json (an axis
    sweep's too) is one of its names, and each of its names is written by one of them."""
    sweep = load(REPO / "test_matrix" / matrix)
    store = RunStore(tmp_path, "r-1")
    run_json = RunJson(store)
    run_json.create(sweep, tuple(sweep.clusters.values()), [c.id for c in sweep.configs],
                    owner={"host": "h", "pid": 1, "resume": None})
    run_json.selection({"pp1": {4}})
    run_json.nodes(["10.0.0.1"], {})
    run_json.server("0.4", True, 10.0)
    run_json.adaptive(2)
    run_json.drop_skipped({"pp1": "predicted"})
    run_json.boot_history({"input_tps": {"var": 1e-4, "df": 3.0, "configurations": 1,
                                         "runs": 4}})
    run_json.run_status("complete")
    written = set(store.read_run_json())
    assert written <= RunKey.all()
    if sweep.axis_names:
        assert written == RunKey.all()


def test_the_owner_reads_back_typed(tmp_path: Path) -> None:
    """run.json ``owner`` as RunOwner: what create wrote; empty for a folder written before
    it or a broken entry (a pid that is not a number reads as 0, not an error)."""
    sweep = load(REPO / "test_matrix" / "cpu.toml")
    store = RunStore(tmp_path, "r-1")
    RunJson(store).create(sweep, tuple(sweep.clusters.values()), [c.id for c in sweep.configs],
                          owner={"host": "node-a", "pid": 4711, "resume": "pytest --x"})
    assert RunOwner.of(store.read_run_json()) == RunOwner("node-a", 4711, "pytest --x")
    assert RunOwner.of({}) == RunOwner()
    assert RunOwner.of({RunKey.OWNER: {"host": "h", "pid": "x"}}) == RunOwner("h", 0, None)
