"""Manifests for reuse: what they hold, every kind of difference, when reuse is allowed; resume."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.runs import Point, record_run, rounds

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import RESULT_COLUMNS
from pytest_ppsweep.matrix.model import Host, Sweep
from pytest_ppsweep.matrix.parse import load

MATRIX = Path(__file__).parents[2] / "test_matrix" / "ppsweep.toml"
CID = "pp8-tp4-ep4"


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return load(MATRIX, "local")


def _build(sweep: Sweep, **kw: Any) -> dict[str, Any]:
    return manifest.build(sweep, sweep.cluster("local"), sweep.config(CID), **kw)


def test_build_holds_everything_and_redacts(sweep: Sweep) -> None:
    cluster = sweep.cluster("local")
    secret = replace(sweep, server={**sweep.server, "api_key": "s3cret"},
                     env={**sweep.env, "HF_TOKEN": "hf_s3cret"})
    m = manifest.build(secret, cluster, secret.config(CID), image_id="sha256:1",
                       engine_version="0.5.3")
    assert json.loads(json.dumps(m)) == m
    assert "s3cret" not in json.dumps(m)
    assert m["server"]["api_key"] == m["env"]["HF_TOKEN"] == "<redacted>"
    argv = m["nodes"][0]["argv"]
    assert argv[argv.index("--api-key") + 1] == "<redacted>"
    assert (m["image"], m["image_id"], m["engine_version"]) == (sweep.image, "sha256:1", "0.5.3")
    assert m["layout"] == {"pp": 8, "tp": 4, "ep": 4}
    assert m["server"]["chunked_prefill_size"] == 8192
    assert m["workload"]["concurrency"] == [8, 16] and m["workload"]["seed"] == 1
    assert [n["address"] for n in m["nodes"]] == [h.address for h in cluster.hosts]
    assert m["nodes"][3]["argv"][m["nodes"][3]["argv"].index("--node-rank") + 1] == "3"
    assert m["nodes"][1]["env"]["NCCL_IB_HCA"] == "mlx5_0,mlx5_1,mlx5_2,mlx5_3"


def test_identical_and_per_run_fields_ignored(sweep: Sweep, tmp_path: Path) -> None:
    m = _build(sweep)
    assert manifest.differences(m, _build(sweep)) == []
    manifest.write(tmp_path / "run-a", CID, m)
    stored = manifest.load(tmp_path / "run-a", CID)
    assert stored is not None and stored["run"]["run_id"] == "run-a"
    assert manifest.differences(stored, m) == []


def test_server_flag_difference(sweep: Sweep) -> None:
    other = replace(sweep, server={**sweep.server, "chunked_prefill_size": 16384})
    assert manifest.differences(_build(sweep), _build(other)) == [
        "server.chunked_prefill_size: 8192 → 16384"]


def test_bare_flag_added_and_config_level_server(sweep: Sweep) -> None:
    configs = tuple(replace(c, server={"enable_dp_attention": True}) if c.id == CID else c
                    for c in sweep.configs)
    assert manifest.differences(_build(sweep), _build(replace(sweep, configs=configs))) == [
        "server.enable_dp_attention: (absent) → true"]


def test_env_difference(sweep: Sweep) -> None:
    other = replace(sweep, env={**sweep.env, "NCCL_IB_HCA": "mlx5_0,mlx5_1"})
    assert manifest.differences(_build(sweep), _build(other)) == [
        "env.NCCL_IB_HCA: mlx5_0,mlx5_1,mlx5_2,mlx5_3 → mlx5_0,mlx5_1"]


def test_image_version_and_model_differences(sweep: Sweep) -> None:
    a = _build(sweep, image_id="sha256:aaa", engine_version="0.5.2")
    b = _build(replace(sweep, image="local/sglang:new", model_path="/data/other"),
               image_id="sha256:bbb", engine_version=None)
    assert manifest.differences(a, b) == [
        f"image: {sweep.image} → local/sglang:new", "image_id: sha256:aaa → sha256:bbb",
        "engine_version: 0.5.2 → (unknown)", f"model_path: {sweep.model_path} → /data/other"]


def test_workload_and_cluster_differences(sweep: Sweep) -> None:
    cluster = sweep.cluster("local")
    hosts = (*cluster.hosts[:3], Host("127.0.6.9", "127.0.6.9"))
    other = replace(sweep, workload=replace(sweep.workload, num_requests=80),
                    clusters={"local": replace(cluster, hosts=hosts)})
    diffs = manifest.differences(_build(sweep), _build(other))
    assert "workload.num_requests: 40 → 80" in diffs
    assert "cluster.hosts[3].address: 127.0.6.4 → 127.0.6.9" in diffs
    assert "cluster.hosts[3].name: 127.0.6.4 → 127.0.6.9" in diffs


def test_node_only_difference_written_once(sweep: Sweep) -> None:
    cluster = sweep.cluster("local")
    other = replace(sweep, clusters={"local": replace(cluster, python="/opt/py/bin/python3")})
    diffs = manifest.differences(_build(sweep), _build(other))
    assert diffs[0].startswith("cluster.python:  → /opt/py/bin/python3")
    assert diffs[1].startswith("nodes.argv.python: ") and diffs[1].endswith("/opt/py/bin/python3")
    assert len(diffs) == 2


def test_node_level_difference_by_hand(sweep: Sweep) -> None:
    a, b = _build(sweep), _build(sweep)
    b["nodes"][2]["env"]["SGLANG_CPU_OMP_THREADS_BIND"] = "0-3"
    b["nodes"][2]["argv"].append("--enable-metrics")
    assert manifest.differences(a, b) == [
        "node2.argv.--enable-metrics: (absent) → true",
        "node2.env.SGLANG_CPU_OMP_THREADS_BIND: (absent) → 0-3"]


# -- reuse -----------------------------------------------------------------------------------

def _reference(tmp_path: Path, sweep: Sweep, m: dict[str, Any], **kw: Any) -> Path:
    points = [Point(CID, 8, 4, 4, 8, 8809.5, 13.47, 16.45),
              Point(CID, 8, 4, 4, 16, 8824.12, 27.31, 29.77)]
    run = record_run(tmp_path, "ref", points, **kw)
    manifest.write(run, CID, m)
    return run


def test_reuse_accepted_when_identical_and_complete(sweep: Sweep, tmp_path: Path) -> None:
    m = _build(sweep)
    ref = _reference(tmp_path, sweep, m)
    assert manifest.reusable(ref, CID, _build(sweep)) == (True, [])
    rows = manifest.reused_rows(ref, CID, "new-run")
    assert len(rows) == 6 and set(rows[0]) == set(RESULT_COLUMNS)
    assert {(r["run_id"], r["reused"]) for r in rows} == {("new-run", "True")}


def test_reuse_refused_on_any_difference(sweep: Sweep, tmp_path: Path) -> None:
    ref = _reference(tmp_path, sweep, _build(sweep))
    other = _build(replace(sweep, image="local/sglang:new-image"))
    ok, reasons = manifest.reusable(ref, CID, other)
    assert not ok
    assert reasons == [f"image: {sweep.image} → local/sglang:new-image"]


def test_reuse_refused_when_reference_incomplete(sweep: Sweep, tmp_path: Path) -> None:
    short = [*rounds(Point(CID, 8, 4, 4, 16, 8824.12, 27.31, 29.77), run_id="ref")]
    short[2].update(completed=39, failed=1)
    run = record_run(tmp_path, "ref", [Point(CID, 8, 4, 4, 8, 8809.5, 13.47, 16.45)],
                     rows=short[1:])
    manifest.write(run, CID, _build(sweep))
    ok, reasons = manifest.reusable(run, CID, _build(sweep))
    assert not ok
    assert reasons == [f"{CID} C=16: repeat(s) 1, 3 not completed 40/40 in the reference run"]


def test_reuse_refused_without_manifest_or_with_log_findings(sweep: Sweep,
                                                            tmp_path: Path) -> None:
    run = record_run(tmp_path, "ref", [Point(CID, 8, 4, 4, 8, 8809.5, 13.47, 16.45)])
    ok, reasons = manifest.reusable(run, CID, _build(sweep))
    assert not ok and reasons[0].endswith(f"{CID}.manifest.json: no manifest for {CID}")
    ref = _reference(tmp_path / "b", sweep, _build(sweep))
    (ref / "configs.csv").write_text((ref / "configs.csv").read_text().replace(
        ",True,,True,", ",True,,False,"), encoding="utf-8")
    ok, reasons = manifest.reusable(ref, CID, _build(sweep))
    assert not ok and f"{CID} had fatal log lines in the reference run (log_clean = False)" in (
        reasons)


def test_unknown_version_pinned_by_identical_image_id(sweep: Sweep, tmp_path: Path) -> None:
    ref = _reference(tmp_path, sweep, _build(sweep, image_id="sha256:1", engine_version="0.5.3"))
    assert manifest.reusable(ref, CID, _build(sweep, image_id="sha256:1"))[0]
    ok, reasons = manifest.reusable(ref, CID, _build(sweep))
    assert not ok and "image_id: sha256:1 → (unknown)" in reasons


def test_a_manifest_of_format_2_reads_as_today_and_is_reused(sweep: Sweep,
                                                            tmp_path: Path) -> None:
    """A reference written before manifests named the engine (its version under
    ``sglang_version``, no ``engine``) reads as the default engine with that version, and a
    layout with the same image id is reused from it; a wrong version still refuses."""
    today = _build(sweep, image_id="sha256:1", engine_version="0.5.23")
    legacy = {k: v for k, v in today.items() if k not in ("engine", "engine_version")}
    legacy["sglang_version"] = "0.5.23"
    ref = _reference(tmp_path, sweep, legacy)
    read = manifest.load(ref, CID)
    assert read is not None and "sglang_version" not in read
    assert (read["engine"], read["engine_version"]) == ("sglang", "0.5.23")
    assert manifest.reusable(ref, CID, _build(sweep, image_id="sha256:1")) == (True, [])
    ok, reasons = manifest.reusable(ref, CID, _build(sweep, image_id="sha256:1",
                                                     engine_version="0.5.24"))
    assert not ok and "engine_version: 0.5.23 → 0.5.24" in reasons


def test_adopt_takes_rows_facts_and_evidence(sweep: Sweep, tmp_path: Path) -> None:
    from pytest_ppsweep.folder.runfolder import RunStore
    from pytest_ppsweep.gate.comparison import compare, regressions

    m = _build(sweep)
    ref = _reference(tmp_path, sweep, m)
    (ref / "service" / CID).mkdir(parents=True)
    (ref / "service" / CID / "node0.log").write_text("ready\n", encoding="utf-8")
    RunStore(ref.parent, ref.name).update_config(CID, cluster="local", held_s=512.5)
    store = RunStore(tmp_path, "new")
    store.write_json("metadata/run.json", {"run_id": "new", "order": [CID]})
    assert manifest.adopt(ref, store, CID, m) == 6
    assert manifest.finished_rounds(store.dir) == manifest.finished_rounds(ref)
    assert store.config_rows()[CID]["boot_ok"] == "True"
    # Where it ran is kept; the cluster time is the reference's, not this run's.
    assert store.config_rows()[CID]["cluster"] == "local"
    assert store.config_rows()[CID]["held_s"] == ""
    assert (store.dir / "service" / CID / "node0.log").read_text() == "ready\n"
    stored = manifest.load(store.dir, CID)
    assert stored is not None and stored["reused_from"] == str(ref.resolve())
    assert manifest.reusable(store.dir, CID, m) == (True, [])  # a reuse can be reused
    assert not regressions(compare(store.dir, ref))


# -- resume ----------------------------------------------------------------------------------

def test_finished_rounds_tolerates_a_torn_line(tmp_path: Path) -> None:
    run = record_run(tmp_path, "run", [Point(CID, 8, 4, 4, 8, 8809.5, 13.47, 16.45)])
    with (run / "results.csv").open("a", encoding="utf-8") as fh:
        fh.write(f"run,{CID},8,4,4,16,1,40,4")  # killed while writing C=16 round 1
    assert manifest.finished_rounds(run) == {(CID, 8, 1), (CID, 8, 2), (CID, 8, 3)}
    assert manifest.repair_torn_tail(run)
    repaired = (run / "results.csv").read_bytes()  # the torn line gone, whole rows kept
    assert repaired.endswith(b"\r\n") and f"{CID},8,4,4,16,1,40,4".encode() not in repaired
    assert manifest.finished_rounds(run) == {(CID, 8, 1), (CID, 8, 2), (CID, 8, 3)}
    assert not manifest.repair_torn_tail(run)
    assert manifest.finished_rounds(tmp_path / "nothing") == set()


def test_a_pd_layout_records_its_deployment_and_a_comparison_studies_it() -> None:
    """A layout of several server groups records its groups (role, shape, own flags, secrets
    redacted) and router; a single serve group's manifest has no such key (older manifests stay
    comparable). Against an aggregated layout, the differences of every rank's host, command and
    environment follow from the deployment: not confounded; an image change still is."""
    from pytest_ppsweep.results.confound import DEPLOYMENT_STUDY, LAYOUT_STUDY, extra_fields

    pd_sweep = load(MATRIX.parent / "pd.toml", "local")
    pd = pd_sweep.config("p1-pp4tp4ep4-d1-tp16ep4")
    secret = replace(pd, deployed=replace(pd.deployment, groups=tuple(
        replace(g, flags={**g.flags, "api_key": "s3cret"}) for g in pd.deployment.groups)))
    cluster = pd_sweep.cluster("local")
    m = manifest.build(pd_sweep, cluster, secret)
    facts = m["deployment"]
    assert [(g["label"], g["role"], g["pp"], g["tp"]) for g in facts["groups"]] == [
        ("prefill0", "prefill", 4, 4), ("decode0", "decode", 1, 16)]
    assert facts["router"]["policy"] == "round_robin" and facts["transfer_backend"] == "mooncake"
    assert "s3cret" not in json.dumps(m)
    aggregated = manifest.build(pd_sweep, cluster, pd_sweep.config("pp8-tp4-ep4"))
    assert "deployment" not in aggregated
    assert extra_fields(aggregated, m, DEPLOYMENT_STUDY) == []
    assert extra_fields(aggregated, m, LAYOUT_STUDY) == []  # a layout comparison: the same
    plain = {k: v for k, v in m.items() if k != "deployment"}
    assert extra_fields(aggregated, plain, LAYOUT_STUDY)  # without its deployment: confounded
    other_image = manifest.build(replace(pd_sweep, image="local/sglang:other"), cluster, pd)
    assert extra_fields(aggregated, other_image, DEPLOYMENT_STUDY) == ["image"]
