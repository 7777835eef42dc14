"""``--ppsweep-dry-run``'s lines from the sweep file alone: every node's launch command and
environment per point (redacted), the boots and an estimated cluster time."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from support.matrices import replace_once, seed_text
from support.paths import REPO, SEED

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.report.dryrun import SEEDS, cluster_time, dry_run_lines


def _seed_with_secret(tmp_path: Path) -> Path:
    path = tmp_path / "ppsweep.toml"
    path.write_text(replace_once(seed_text(), '[env]\n',
                                 '[env]\nHF_TOKEN = "hf_dryrunsecret123"\n'))
    return path


def test_every_node_of_every_point_with_its_command_and_redacted_env(tmp_path: Path) -> None:
    sweep = load(_seed_with_secret(tmp_path))
    cluster = sweep.cluster(None)
    lines = dry_run_lines(sweep, cluster, sweep.configs, tmp_path / "reports")
    text = "\n".join(lines)
    assert "hf_dryrunsecret123" not in text and "HF_TOKEN=" in text
    nodes = [line for line in lines if line.startswith("  node")]
    assert len(nodes) == len(sweep.configs) * len(cluster.hosts) == 20
    pp8 = lines.index("pp8-tp4-ep4: PP/TP/EP 8 / 4 / 4 at C = 8, 16")
    assert lines[pp8 + 2].startswith("  node1 127.0.6.2 (127.0.6.2): env ")
    assert "-m pytest_ppsweep.sim --model-path /data/hf_models/Kimi-K3 --tp-size 4 --pp-size 8" \
        in lines[pp8 + 2]
    assert "--node-rank 1 --dist-init-addr 127.0.6.1:20000" in lines[pp8 + 2]
    assert "--chunked-prefill-size 8192 --disable-radix-cache" in lines[pp8 + 2]
    assert "NCCL_SOCKET_IFNAME=bond0" in lines[pp8 + 2]
    assert lines[-2] == "boots: 5 (one per point)"
    # no earlier run: the seeds' figures for a Kimi-K3 model at the emulator's time scale (5
    # boots of 338-538 s, 5 × 2 C × 121 requests of 16,384 tokens at 8,824-3,258 tok/s, ÷ 100)
    assert lines[-1] == ("estimated cluster time: about 39 s to 88 s (the seeds' Kimi-K3 cluster "
                         "(4 × 8 RTX 6000D): 338-538 s per boot, Input TPS 3,258-8,824 tok/s at "
                         "16K prompts (PP1…PP8), at the emulator's time scale 100); at most 2.5 h "
                         "of boots (5 boot(s) × boot_timeout_s 1800 s)")
    assert not (tmp_path / "reports").exists()


def test_the_estimate_comes_from_a_fitted_profile_where_one_exists(tmp_path: Path) -> None:
    from pytest_ppsweep.planner.data import load_measured
    from pytest_ppsweep.planner.fitting import fit

    sweep = load(SEED)
    reports = tmp_path / "reports"
    profile = reports / f"{sweep.name}-20261201-090000" / "planner" / "profile.json"
    fit(load_measured([REPO / "benchmarks" / "data" / "seeds_medians.csv"])).write(profile)
    est = cluster_time(sweep, sweep.configs, reports)
    assert est.source == f"fitted profile {profile}" and not est.bound
    # 5 boots of minutes and 5 × 2 C × (3 × 40 + 1) requests of 16,384 tokens at thousands of
    # tokens/s: between a quarter of an hour and a few hours
    assert 900 < est.seconds < 4 * 3600, est
    one = cluster_time(sweep, sweep.configs[:1], reports)
    assert 0 < one.seconds < est.seconds
    shutil.rmtree(profile.parent)
    seeds = cluster_time(sweep, sweep.configs, reports)
    assert seeds.low is not None and seeds.source == SEEDS.source and not seeds.bound
    # a model the tool has no reference for: the boot bound alone, said so
    other = replace(sweep, model_path="/data/hf_models/Some-Other-Model")
    bound = cluster_time(other, sweep.configs, reports)
    assert bound.bound and bound.describe() == (
        "at most 2.5 h of boots (5 boot(s) × boot_timeout_s 1800 s; no fitted profile, earlier "
        "run of this sweep or reference for its model to estimate the rounds)")


def test_earlier_runs_are_found_by_their_sweep_whatever_their_id(tmp_path: Path) -> None:
    from pytest_ppsweep.pool.balance import earlier_runs, expected_durations

    reports = tmp_path / "reports"
    for rid, sweep_name in (("my-own-id", "kimi3-pp"), ("kimi3-pp-20261201-090000", "other"),
                            ("broken", None)):
        meta = reports / rid / "metadata"
        meta.mkdir(parents=True)
        (reports / rid / "configs.csv").write_text(
            "config_id,boot_ok,held_s\npp8-tp4-ep4,True,42.5\n")
        (meta / "run.json").write_text(
            json.dumps({"sweep": sweep_name}) if sweep_name else "{torn")
    assert [p.name for p in earlier_runs(reports, "kimi3-pp")] == ["my-own-id"]
    est = expected_durations(reports, "kimi3-pp", ["pp8-tp4-ep4"])
    assert est.seconds == {"pp8-tp4-ep4": 42.5} and est.sources == ("my-own-id",)


def test_a_docker_cluster_names_the_image(tmp_path: Path) -> None:
    sweep = load(SEED, cluster="pro6000")
    lines = dry_run_lines(sweep, sweep.cluster("pro6000"), sweep.configs[:1], tmp_path)
    assert lines[1] == f"each command runs in a container of image {sweep.image} on its node"
    assert lines[3].startswith("  node0 601 (174.1.60.1): env ")
