"""Axes in the sweep file (matrix/axes.py): ids, products, rules, workloads, SGLang's EP
rewrite and every validation error, on the shipped example sweeps and small files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from support.paths import REPO

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import RunFolder
from pytest_ppsweep.matrix import MatrixError, load
from pytest_ppsweep.matrix.model import boot_groups, select
from pytest_ppsweep.pool.scheduling import PoolScheduling
from pytest_ppsweep.results import confound
from pytest_ppsweep.session.collection import points_from_ids

MATRIX = REPO / "test_matrix"

HEAD = """
[sweep]
name = "t"
model_path = "/m"
ep_cap = 4

[server]
moe_a2a_backend = "none"
chunked_prefill_size = 8192

[[configs]]
pp = 4
tp = 8

[[configs]]
pp = 8
tp = 4

[workload]
input_len = 64
output_len = 1
concurrency = [2]
num_requests = 2

[clusters.local]
kind = "local"
hosts = ["127.0.40.1", "127.0.40.2", "127.0.40.3", "127.0.40.4"]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
"""


def sweep_of(tmp_path: Path, extra: str, head: str = HEAD) -> object:
    path = tmp_path / "s.toml"
    path.write_text(head + extra)
    return load(path)


def error_of(tmp_path: Path, extra: str, head: str = HEAD) -> str:
    with pytest.raises(MatrixError) as info:
        sweep_of(tmp_path, extra, head)
    return str(info.value)


def test_ppsweep_keeps_its_ids() -> None:
    sweep = load(MATRIX / "ppsweep.toml")
    assert [c.id for c in sweep.configs] == [
        "pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2"]
    assert sweep.baseline == "pp1-tp32-ep4"
    assert not sweep.workloads and not sweep.axis_names


def test_a2a_sweep_ids_labels_and_the_ep_rewrite() -> None:
    sweep = load(MATRIX / "a2a.toml")
    ids = [c.id for c in sweep.configs]
    assert ids == ["pp8-tp4-ep4", "pp8-tp4-ep4-a2a_deepep", "pp8-tp4-ep4-a2a_flashinfer",
                   "pp4-tp8-ep4", "pp4-tp8-ep8-a2a_deepep", "pp4-tp8-ep8-a2a_flashinfer"]
    deepep = sweep.config("pp4-tp8-ep8-a2a_deepep")
    # "PP4/TP8/EP4 + deepep" really runs EP8 (SGLang sets EP = TP): labelled so, EP 4 asked
    assert (deepep.ep, deepep.asked_ep, deepep.label) == (8, 4, "4 / 8 / 8 (asked EP 4)")
    assert deepep.server["moe_a2a_backend"] == "deepep"
    assert sweep.compare_baseline == {"moe_a2a_backend": "none"}
    # exact and layout selection on the new ids
    assert [c.id for c in sweep.configs if c.matches("pp4-tp8-ep8-a2a_deepep")] == [deepep.id]
    assert len([c for c in sweep.configs if c.matches("pp8")]) == 3
    # old SGLang only rewrites for deepep and mooncake
    text = (MATRIX / "a2a.toml").read_text().replace(
        'name = "kimi3-a2a"', 'name = "kimi3-a2a"\na2a_ep_backends = ["deepep", "mooncake"]')
    assert "pp4-tp8-ep4-a2a_flashinfer" in [c.id for c in _loads(text).configs]


def _loads(text: str) -> object:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.toml"
        path.write_text(_shared_from_the_repo(text))
        return load(path)


def _shared_from_the_repo(text: str) -> str:
    """An example sweep's text written elsewhere still takes test_matrix/cluster.toml."""
    return text.replace('extends = "cluster.toml"', f'extends = "{MATRIX / "cluster.toml"}"')


def test_microbatch_and_chunk_sweeps() -> None:
    mb = load(MATRIX / "microbatch.toml")
    assert [c.id for c in mb.configs][:4] == [
        "pp4-tp8-ep4-prefill", "pp4-tp8-ep4-decode", "pp4-tp8-ep4-mbs1-prefill",
        "pp4-tp8-ep4-mbs1-decode"]
    unset = mb.config("pp4-tp8-ep4-prefill")
    assert "pp_max_micro_batch_size" not in unset.server  # "unset": the flag is not passed
    assert mb.config("pp8-tp4-ep4-mbs1-decode").server["pp_max_micro_batch_size"] == 1
    assert mb.workload_of(mb.config("pp8-tp4-ep4-decode")).concurrency == (1, 8, 16)
    assert mb.workload_of(mb.config("pp8-tp4-ep4-prefill")).output_len == 1
    assert mb.baseline == "pp4-tp8-ep4-prefill"
    chunk = load(MATRIX / "chunk.toml")
    assert "pp4-tp8-ep4-chunk16k" in [c.id for c in chunk.configs]
    assert "pp4-tp8-ep4" in [c.id for c in chunk.configs]


def test_exclude_include_env_axes_and_workload_rules(tmp_path: Path) -> None:
    sweep = sweep_of(tmp_path, """
[axes]
chunked_prefill_size = [8192, 16384]
[axes.env]
SGLANG_X = ["0", "1"]

[[exclude]]
pp = 8
SGLANG_X = "1"

[[include]]
pp = 8
tp = 4
ep = 2
chunked_prefill_size = 16384
""")
    ids = [c.id for c in sweep.configs]  # type: ignore[attr-defined]
    assert ids == ["pp4-tp8-ep4", "pp4-tp8-ep4-sglang_x_1", "pp4-tp8-ep4-chunk16k",
                   "pp4-tp8-ep4-chunk16k-sglang_x_1", "pp8-tp4-ep4", "pp8-tp4-ep4-chunk16k",
                   "pp8-tp4-ep2-chunk16k"]
    assert sweep.config("pp4-tp8-ep4-sglang_x_1").env == {"SGLANG_X": "1"}  # type: ignore


def test_explicit_configs_differing_only_in_a2a_are_two_points(tmp_path: Path) -> None:
    sweep = sweep_of(tmp_path, """
[[configs]]
pp = 8
tp = 4
server = { moe_a2a_backend = "deepep" }
""")
    assert [c.id for c in sweep.configs] == [  # type: ignore[attr-defined]
        "pp4-tp8-ep4", "pp8-tp4-ep4", "pp8-tp4-ep4-a2a_deepep"]


@pytest.mark.parametrize(("extra", "expected"), [
    ("[axes]\ntp_size = [4, 8]\n", "key 'axes.tp_size': expected an axis over a flag the sweep "
     "may set, found 'tp_size', which the plugin sets"),
    ("[axes]\nchunked_prefill_size = [\"8k\", \"16k\"]\n",
     "key 'axes.chunked_prefill_size': expected values of the type of "
     "server.chunked_prefill_size (an integer, 8192), found a string '8k'"),
    ("[axes]\nmoe_a2a_backend = []\n",
     "key 'axes.moe_a2a_backend': expected a non-empty list of values, found an empty list"),
    ("[axes]\nmoe_a2a_backend = \"deepep\"\n",
     "key 'axes.moe_a2a_backend': expected a list of values, found a string 'deepep'"),
    ("[axes]\nmoe_a2a_backend = [\"none\", 3]\n",
     "key 'axes.moe_a2a_backend[1]': expected a string like the axis's first value"),
    ("[axes]\nmoe_a2a_backend = [\"none\", \"none\"]\n",
     "key 'axes.moe_a2a_backend': expected each value once"),
    ("[sweep2]\n", "unknown key 'sweep2'"),
    ("[axes]\nmax_running_requests = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
     "chunked_prefill_size = [1024, 2048, 4096, 8192]\n",
     "key 'axes': expected at most 64 points (layouts × axes × workloads; raise [sweep] "
     "max_points to confirm a larger sweep), found 2 × 9 × 4 × 1 = 72"),
    ("[axes]\nmoe_a2a_backend = [\"none\", \"deepep\"]\n[[exclude]]\nbackend = \"x\"\n",
     "unknown key 'exclude[0].backend'"),
    ("[axes]\nmoe_a2a_backend = [\"none\"]\n[compare]\nbaseline = { chunk = 1 }\n",
     "key 'compare.baseline.chunk': expected one of the sweep's axes (moe_a2a_backend)"),
    ("[axes]\nep = [3]\n", "expected TP % EP == 0"),
    ("[axes]\nmoe_a2a_backend = [\"none\"]\n[[exclude]]\npp = 4\n[[exclude]]\npp = 8\n",
     "key 'exclude': expected at least one point left"),
    ("[axes]\nmoe_a2a_backend = [\"unset\", \"deepep\"]\n",
     "expected 'unset' only for a flag [server] does not set"),
])
def test_validation_errors_name_file_key_expected_found(
        tmp_path: Path, extra: str, expected: str) -> None:
    message = error_of(tmp_path, extra)
    assert message.startswith(str(tmp_path / "s.toml")), message
    assert expected in message, message


def test_max_points_confirms_a_larger_sweep(tmp_path: Path) -> None:
    big = ("[axes]\nmax_running_requests = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
           "chunked_prefill_size = [1024, 2048, 4096, 8192]\n")
    head = HEAD.replace("ep_cap = 4", "ep_cap = 4\nmax_points = 100")
    assert len(sweep_of(tmp_path, big, head).configs) == 72  # type: ignore[attr-defined]


def test_workload_name_is_checked(tmp_path: Path) -> None:
    message = error_of(tmp_path, "[workloads.Decode-1]\ninput_len = 8\n")
    assert "key 'workloads.Decode-1': expected a workload name" in message


def test_xdist_pool_and_selection_find_axis_ids() -> None:
    sweep = load(MATRIX / "a2a.toml")
    fake = SimpleNamespace(_sweep=sweep, _known=sorted((c.id for c in sweep.configs),
                                                       key=len, reverse=True),
                           _unit=boot_groups(sweep.configs))
    split = PoolScheduling._split_scope
    assert split(fake, "t.py::test_prefill[pp4-tp8-ep8-a2a_deepep-c8]") == (
        "pp4-tp8-ep8-a2a_deepep")
    assert split(fake, "t.py::test_topology[pp8-tp4-ep4]") == "pp8-tp4-ep4"
    assert split(fake, "t.py::test_prefill[pp8-tp4-ep4-c16]") == "pp8-tp4-ep4"
    # two workloads of one server configuration are one xdist work unit (one boot)
    two = load(MATRIX / "microbatch.toml")
    unit = SimpleNamespace(_sweep=two, _known=sorted((c.id for c in two.configs), key=len,
                                                     reverse=True), _unit=boot_groups(two.configs))
    assert split(unit, "t.py::test_prefill[pp8-tp4-ep4-mbs1-decode-c8]") == (
        "pp8-tp4-ep4-mbs1-prefill")
    assert split(unit, "t.py::test_topology[pp8-tp4-ep4-decode]") == "pp8-tp4-ep4-prefill"
    ids = [c.id for c in sweep.configs]
    points = points_from_ids(["t.py::test_prefill[pp8-tp4-ep4-a2a_flashinfer-c16]",
                              "t.py::test_logs_clean[pp8-tp4-ep4]"], ids)
    assert points == {"pp8-tp4-ep4-a2a_flashinfer": {16}, "pp8-tp4-ep4": set()}


def test_collection_ids_k_and_exact_selection() -> None:
    """Test ids carry axis values and the workload (only a workload's own Cs); -k and
    --ppsweep-config (exact) select on them. Collection only: nothing boots."""
    def collect(*args: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "test_matrix", "--collect-only", "-q",
             "-p", "no:cacheprovider", "--ppsweep-matrix", "test_matrix/microbatch.toml",
             "--ppsweep-reports", "/tmp/ppsweep-axes-collect", *args],
            cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        return [line for line in out.stdout.splitlines() if "::" in line]

    items = collect()
    assert "test_matrix/test_sweep.py::test_prefill[pp8-tp4-ep4-mbs1-decode-c1]" in items
    assert "test_matrix/test_sweep.py::test_prefill[pp8-tp4-ep4-mbs1-prefill-c16]" in items
    assert not [i for i in items if "prefill-c1]" in i]  # C=1 is the decode workload's only
    exact = collect("--ppsweep-config", "pp4-tp8-ep4-decode")
    assert {i.split("[")[1].split("]")[0].rsplit("-c", 1)[0] for i in exact} == {
        "pp4-tp8-ep4-decode"}
    picked = collect("-k", "mbs1 and decode and pp8")
    assert picked and all("pp8-tp4-ep4-mbs1-decode" in i for i in picked)


def _fake_run(tmp_path: Path, matrix: Path) -> tuple[Path, pd.DataFrame]:
    sweep = load(matrix)
    cluster = sweep.cluster(None)
    run = tmp_path / "run"
    for cfg in sweep.configs:
        manifest.write(run, cfg.id, manifest.build(sweep, cluster, cfg))
    from pytest_ppsweep.folder.runfolder import axis_fields

    (run / "metadata" / "run.json").write_text(json.dumps(
        {"run_id": "run", "baseline": sweep.baseline, "order": [c.id for c in sweep.configs],
         **axis_fields(sweep)}))
    table = pd.DataFrame([{"config_id": c.id, "concurrency": 8, "pp": c.pp, "tp": c.tp,
                           "ep": c.ep} for c in sweep.configs])
    return run, table


def test_pp16_caveat_appears_by_itself_on_ppsweep(tmp_path: Path) -> None:
    run, table = _fake_run(tmp_path, MATRIX / "ppsweep.toml")
    frame = confound.comparisons(run, RunFolder(run).read_run_json(), table)
    step = frame[(frame["kind"] == "step") & (frame["config_id"] == "pp16-tp2-ep2")].iloc[0]
    assert step["reference"] == "pp8-tp4-ep4"
    assert bool(step["confounded"])
    assert step["extra"] == ("layout.ep, server.disable_decode_cuda_graph, "
                             "server.watchdog_timeout")
    assert "layout.tp: 4 → 2" in step["differs"] and "layout.ep: 4 → 2" in step["differs"]
    clean = frame[(frame["kind"] == "step") & (frame["config_id"] == "pp8-tp4-ep4")].iloc[0]
    assert not bool(clean["confounded"]) and clean["differs"] == (
        "layout.pp: 4 → 8; layout.tp: 8 → 4")
    assert any("CONFOUNDED pp8-tp4-ep4 → pp16-tp2-ep2 (step)" in line
               for line in confound.confounded_lines(frame))


def test_a2a_comparisons_per_group_baseline(tmp_path: Path) -> None:
    run, table = _fake_run(tmp_path, MATRIX / "a2a.toml")
    frame = confound.comparisons(run, RunFolder(run).read_run_json(), table)
    axis = frame[frame["kind"] == "axis moe_a2a_backend"].set_index("config_id")
    # each variant against the same layout at moe_a2a_backend = none
    assert axis.loc["pp8-tp4-ep4-a2a_deepep", "reference"] == "pp8-tp4-ep4"
    assert not bool(axis.loc["pp8-tp4-ep4-a2a_deepep", "confounded"])
    assert axis.loc["pp8-tp4-ep4-a2a_deepep", "differs"] == "server.moe_a2a_backend: none → deepep"
    assert axis.loc["pp4-tp8-ep8-a2a_deepep", "reference"] == "pp4-tp8-ep4"
    assert bool(axis.loc["pp4-tp8-ep8-a2a_deepep", "confounded"])
    assert axis.loc["pp4-tp8-ep8-a2a_deepep", "extra"] == "layout.ep"


def test_gate_lists_what_differs_from_the_reference(tmp_path: Path) -> None:
    from pytest_ppsweep import gate

    ref, _ = _fake_run(tmp_path / "a", MATRIX / "a2a.toml")
    text = (MATRIX / "a2a.toml").read_text().replace("phase5", "phase6").replace(
        "[[configs]]", "[server]\nchunked_prefill_size = 16384  # over cluster.toml's 8192\n\n"
        "[[configs]]", 1)
    path = tmp_path / "b.toml"
    path.write_text(_shared_from_the_repo(text))
    cur, _ = _fake_run(tmp_path / "b", path)
    ids = ["pp8-tp4-ep4-a2a_deepep", "pp9-unknown"]
    lines = gate.differs_lines(cur, ref, ids)
    assert lines == ["DIFFERS pp8-tp4-ep4-a2a_deepep: image: "
                     "local/sglang:kimi-k3-sm120-flashinfer-mxfp4-phase5 → "
                     "local/sglang:kimi-k3-sm120-flashinfer-mxfp4-phase6; "
                     "server.chunked_prefill_size: 8192 → 16384"]
    assert gate.differs_lines(ref, ref, ids[:1]) == [
        "SAME pp8-tp4-ep4-a2a_deepep: manifest identical to the reference's"]
    (cur / "gate.csv").write_text("config_id,verdict\npp8-tp4-ep4-a2a_deepep,within noise\n")
    gate.add_differs_column(cur, ref)
    row = next(csv.DictReader((cur / "gate.csv").open()))
    assert row["differs"].startswith("image: ") and "16384" in row["differs"]
    assert "pp8-tp4-ep4-a2a_deepep" in gate.differs_html(cur, ref, ids)
    # decode metrics can be gated (a prefill point without them is not)
    assert {"tpot_p50", "output_tps"} <= set(
        gate.parse_thresholds(["tpot_p50:+5%", "output_tps:-3%"]))


def test_an_exact_id_selects_that_point_only() -> None:
    """``--ppsweep-config pp8-tp4-ep4`` on a2a.toml is PP8's default point, not its variants;
    ``pp8`` or ``pp8-tp4`` is every point of the layout."""
    configs = load(MATRIX / "a2a.toml").configs
    assert [c.id for c in select(configs, "pp8-tp4-ep4")] == ["pp8-tp4-ep4"]
    assert {c.id for c in select(configs, "pp8")} == {
        "pp8-tp4-ep4", "pp8-tp4-ep4-a2a_deepep", "pp8-tp4-ep4-a2a_flashinfer"}
    assert {c.id for c in select(configs, "pp4-tp8")} == {
        "pp4-tp8-ep4", "pp4-tp8-ep8-a2a_deepep", "pp4-tp8-ep8-a2a_flashinfer"}
    assert select(configs, "pp8-tp4-ep4-a2a") == []  # never a substring
