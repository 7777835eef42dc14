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
from pytest_ppsweep.matrix.slurmsettings import with_slurm
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
    assert lines[1] == (f"each command runs in a container of image {sweep.image} on its node, "
                        "with the container options: --init --network host --ipc host "
                        "--shm-size 32g --gpus all --device /dev/infiniband:/dev/infiniband:rwm "
                        "-v /data/hf_models/Kimi-K3:/data/hf_models/Kimi-K3:ro")
    assert lines[3].startswith("  node0 601 (174.1.60.1): env ")


def test_the_slo_search_probes_are_listed_with_their_requests(tmp_path: Path) -> None:
    """slo.toml: the fixed probes (min, max), the bisection's first midpoint (geometric: the
    range spans 40×), the repeats, and each probe's requests; no SLO, no such lines."""
    sweep = load(REPO / "test_matrix" / "slo.toml")
    lines = dry_run_lines(sweep, sweep.cluster(None), sweep.configs, tmp_path / "reports")
    i = lines.index(
        "SLO search of workload 'default' (TTFT p50 ≤ 5 s) on each of 5 point(s) (pp1-tp32-ep4, "
        "pp2-tp16-ep4, pp4-tp8-ep4, pp8-tp4-ep4, pp16-tp2-ep2), after its rounds; each probe "
        "sends 69 requests at that rate (open loop) (requests = \"auto\": each layout's size is "
        "computed before its search from its measured prefill time, measure/probesize.py; "
        "counted here at 69: the workload's own 40 raised to the floor that lets an overload "
        "show, the first probe at the minimum load excepted):")
    assert lines[i + 1:i + 7] == [
        '  probe 1: 0.05 req/s (the minimum; outside the SLO: the search ends, "below min")',
        '  probe 2: 2 req/s (the maximum; within the SLO: the search ends, "at least max")',
        "  probes 3-8: bisection of the bracket (first 0.316 req/s) until it is 0.05 req/s "
        "narrow or 8 probes are spent",
        "  then 2 repeat(s) at the load found (3 rounds in all) and 1 at the bracket's high end "
        "(both ends confirmed)",
        "  then up to 16 refine probe(s) either side of the capacity estimated from every "
        "probe (results/slocapacity.py) until its 95% interval is within ±10 %",
        "  requests per point: 69 to 1863 (27 rounds of 69: 8 probes + 2 repeats + 1 confirm "
        "+ 16 refine), more when a repeat falls outside the SLO and the search goes on below "
        "it",
    ]
    assert lines[i + 7].startswith("boots: ")
    seed = load(SEED)
    assert not any(line.startswith("SLO search") for line in dry_run_lines(
        seed, seed.cluster(None), seed.configs, tmp_path / "reports"))


def test_the_probes_first_midpoint_is_the_policys(tmp_path: Path) -> None:
    """A concurrency search rounds its midpoint down (2…9: the geometric midpoint, √18 = 4.24
    → 4), as the policy does: the dry run asks the policy itself."""
    text = (REPO / "test_matrix" / "slo.toml").read_text()
    text = replace_once(text, 'search = "rate"  ', 'search = "concurrency"  ')
    text = replace_once(text, "min = 0.05  ", "min = 2  ")
    text = replace_once(text, "max = 2.0\n", "max = 9\n")
    text = replace_once(text, "precision = 0.05  ", "precision = 1  ")
    path = tmp_path / "slo.toml"
    path.write_text(text.replace('extends = "cluster.toml"',
                                 f'extends = "{REPO / "test_matrix" / "cluster.toml"}"'))
    sweep = load(path)
    lines = dry_run_lines(sweep, sweep.cluster(None), sweep.configs[:1], tmp_path / "reports")
    assert "  probe 1: 2 C (the minimum; outside the SLO: the search ends, \"below min\")" in lines
    assert ("  probes 3-8: bisection of the bracket (first 4 C) until it is 1 C narrow or 8 "
            "probes are spent") in lines
    assert any(line.endswith("each probe sends 40 requests at that concurrency (requests = "
                             "\"auto\": a concurrency search is a closed loop, not the Poisson "
                             "queue the size is modelled on, so the workload's num_requests):")
               for line in lines), lines


SLURM_SWEEP = """
[sweep]
name = "s"
model_path = "/models/m"
cluster = "gpu"

[[configs]]
pp = 2
tp = 8

[workload]
input_len = 16
output_len = 1
concurrency = [1]
num_requests = 2

[clusters.gpu]
kind = "slurm"
nodes = 2
gpus_per_node = 8
partition = "h200"
time = "02:00:00"
salloc_options = ["--qos=perf"]
srun_options = ["--mpi=none"]
python = "/shared/venv/bin/python"
env = { HF_TOKEN = "hf_secret-value-123" }
"""


def test_a_slurm_dry_run_prints_its_salloc_and_srun_lines(tmp_path: Path) -> None:
    """The allocation's salloc and each point's srun step, as cluster/slurm.py builds them (run
    id and job id as placeholders), from the kind's Backend; with container_image, Pyxis's."""
    path = tmp_path / "ppsweep.toml"
    path.write_text(SLURM_SWEEP)
    sweep = load(path)
    cluster = sweep.clusters["gpu"]
    lines = dry_run_lines(sweep, cluster, sweep.configs, tmp_path / "reports")
    assert lines[1:6] == [
        "Slurm commands run on this machine",
        "allocation: salloc --no-shell --job-name 'ppsweep-<run-id>+gpu' --comment 'ppsweep "
        "run <run-id>' --nodes 2 --ntasks-per-node 1 --exclusive --mem 0 --gpus-per-node 8 "
        "--partition h200 --time 02:00:00 --qos=perf",
        "  (held until the run ends; its 2 nodes replace node0…node1 below, its job id <jobid>)",
        "pp2-tp8-ep1: PP/TP/EP 2 / 8 / 1 at C = 1",
        "  step: srun --overlap --jobid '<jobid>' --job-name 'ppsweep-<run-id>+pp2-tp8-ep1+"
        "<random>' --export ALL --quiet --nodes 2 --ntasks-per-node 1 --ntasks 2 --nodelist "
        "node0,node1 --label --kill-on-bad-exit=0 --mem 0 --gpus-per-node 8 --mpi=none sh -c "
        "'eval \"$PPSWEEP_STEP_SCRIPT\"'",
    ]
    assert lines[7].startswith("  node0 node0 (slurm-node0): env HF_TOKEN=")
    assert "hf_secret-value-123" not in "\n".join(lines)
    # a job taken as it is, on a login node, in an image through Pyxis
    taken = replace(with_slurm(cluster, jobid="4242", login="login1",
                               container_image="nvcr.io#lmsysorg/sglang:v0.5.23"),
                    mounts=("/data/hf_models:/models:ro",))
    lines = dry_run_lines(sweep, taken, sweep.configs, tmp_path / "reports")
    assert lines[1:4] == [
        "Slurm commands run on login node login1 over SSH",
        "allocation: job 4242 is taken as it is (no salloc); its nodes replace node0… below",
        "Pyxis: each step runs in image nvcr.io#lmsysorg/sglang:v0.5.23, mounts "
        "/data/hf_models:/models:ro (srun --container-image); the preflight checks that srun "
        "--help offers --container-image and imports the image once per node into "
        "/tmp/ppsweep-containers/nvcr.io_lmsysorg_sglang_v0.5.23.sqsh",
    ]
    step = lines[5]
    assert step.startswith("  step: srun --overlap --jobid 4242 ")
    assert ("--container-image /tmp/ppsweep-containers/nvcr.io_lmsysorg_sglang_v0.5.23.sqsh "
            "--no-container-entrypoint --no-container-mount-home --container-mounts "
            "/data/hf_models:/models:ro --mpi=none") in step


def test_pytest_dry_run_prints_the_probes_and_the_slurm_lines(tmp_path: Path) -> None:
    """Through the plugin (a real pytest): what --ppsweep-dry-run prints for slo.toml and for
    a Slurm sweep, nothing started, connected or written."""
    import os
    import subprocess
    import sys

    def dry(folder: Path, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", str(folder), "--ppsweep-dry-run", "-q", "-p",
             "no:cacheprovider", "--ppsweep-reports", str(tmp_path / "reports"), *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    out = dry(REPO / "test_matrix", "--ppsweep-matrix", str(REPO / "test_matrix" / "slo.toml"))
    assert "  probe 2: 2 req/s (the maximum; within the SLO: the search ends, \"at least max\")" \
        in out.splitlines()
    slurm = tmp_path / "slurm"
    slurm.mkdir()
    (slurm / "ppsweep.toml").write_text(SLURM_SWEEP)
    (slurm / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
    out = dry(slurm)
    assert "allocation: salloc --no-shell --job-name 'ppsweep-<run-id>+gpu'" in out
    assert "  step: srun --overlap --jobid '<jobid>' " in out
    assert "hf_secret-value-123" not in out
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_the_accuracy_check_is_listed_with_its_questions(tmp_path: Path) -> None:
    """cpu.toml's [accuracy]: its backend, task file and the n each boot is asked."""
    sweep = load(REPO / "test_matrix" / "cpu.toml")
    lines = dry_run_lines(sweep, sweep.cluster("cpu"), sweep.configs[:1], tmp_path)
    assert [x for x in lines if x.startswith("accuracy (")] == [
        f"accuracy (builtin, {REPO / 'test_matrix' / 'cpu_tasks.jsonl'}, 2-shot, exact) once "
        "per boot: n = 16 questions (all the task file has (16); θ = 3.0 points, α = 0.05, "
        "β = 0.2 ask 3435): detects a drop of 44.0 points at this α and β, not 3.0"]
    seed = load(SEED)
    assert not any(x.startswith("accuracy (") for x in dry_run_lines(
        seed, next(iter(seed.clusters.values())), seed.configs[:1], tmp_path))


def test_several_boots_per_layout_multiply_the_boots_and_the_estimate(tmp_path: Path) -> None:
    """[sweep] boots = 3 (--ppsweep-boots): the boots line counts every boot and says the order;
    the estimate is the one-boot estimate three times over, and says so."""
    sweep = load(_seed_with_secret(tmp_path))
    cluster = sweep.cluster(None)
    once = cluster_time(sweep, sweep.configs, tmp_path / "reports", cluster)
    thrice = replace(sweep, boots=3)
    lines = dry_run_lines(thrice, cluster, thrice.configs, tmp_path / "reports")
    assert lines[-2].startswith("boots: 5 (one per point × 3 boots each = 15, every one's first "
                                "boot before any second")
    est = cluster_time(thrice, thrice.configs, tmp_path / "reports", cluster)
    assert est.seconds == 3 * once.seconds and est.low == 3 * (once.low or 0.0)
    assert est.source.endswith("; × 3 boots of each layout") and "× 3 boots" in lines[-1]


def test_the_estimate_uses_only_runs_of_the_same_cluster(tmp_path: Path) -> None:
    """An emulator run of the seeds' sweep on ``local`` says nothing of the real ``pro6000``:
    pro6000's dry run does not estimate from it (it falls back to the seeds' reference), while
    local's does; a real run on pro6000 then estimates pro6000."""
    sweep = load(SEED)
    reports = tmp_path / "reports"

    def earlier(rid: str, cluster: str, simulated: bool, held: float) -> None:
        (reports / rid / "metadata").mkdir(parents=True)
        (reports / rid / "configs.csv").write_text(
            "config_id,boot_ok,held_s\n" + "".join(f"{c.id},True,{held}\n"
                                                   for c in sweep.configs))
        (reports / rid / "metadata" / "run.json").write_text(json.dumps(
            {"sweep": sweep.name, "cluster": cluster, "simulated": simulated}))

    earlier("emulated", "local", True, 12.0)
    local, real = sweep.cluster("local"), sweep.cluster("pro6000")
    assert "emulated" in cluster_time(sweep, sweep.configs, reports, local).source
    on_real = cluster_time(sweep, sweep.configs, reports, real)
    assert "emulated" not in on_real.source and on_real.source.startswith(SEEDS.source), (
        on_real.source)
    earlier("measured", "pro6000", False, 600.0)
    assert "measured" in cluster_time(sweep, sweep.configs, reports, real).source
    assert "measured" not in cluster_time(sweep, sweep.configs, reports, local).source


def test_a_pd_layout_shows_each_group_by_role_its_bootstrap_port_and_the_router(
        tmp_path: Path) -> None:
    pd = REPO / "tests" / "data" / "pd" / "pd.toml"
    sweep = load(pd)
    lines = dry_run_lines(sweep, sweep.cluster(None), sweep.configs, tmp_path / "reports")
    head = lines.index("p1-tp8ep8-d2-tp4ep4: P/D layout, 1 prefill × pp1-tp8-ep8, 2 decode × "
                       "pp1-tp4-ep4, KV transfer nixl, at C = 4")
    block = lines[head + 1:head + 9]
    assert block[0] == ("  prefill0: prefill server pp1-tp8-ep8 on node(s) 127.0.9.1, "
                        "127.0.9.2, bootstrap port 9100, serving http://127.0.9.1:30000")
    assert block[1].startswith("    node0 127.0.9.1 (127.0.9.1): env ")
    assert "--disaggregation-mode prefill --disaggregation-transfer-backend nixl " \
           "--disaggregation-bootstrap-port 9100" in block[1]
    assert block[2].startswith("    node1 127.0.9.2 (127.0.9.2): ")
    assert block[3] == ("  decode0: decode server pp1-tp4-ep4 on node(s) 127.0.9.3, serving "
                        "http://127.0.9.3:30000")
    assert "--disaggregation-mode decode" in block[4]
    assert block[5].startswith("  decode1: decode server pp1-tp4-ep4 on node(s) 127.0.9.4")
    router = block[7]
    assert router.startswith("  router on 127.0.9.1 (127.0.9.1), port 30090, the benchmark's "
                             "URL http://127.0.9.1:30090: env ")
    assert router.endswith("-m sglang_router.launch_router --pd-disaggregation --prefill "
                           "http://127.0.9.1:30000 9100 --decode http://127.0.9.3:30000 "
                           "--decode http://127.0.9.4:30000 --host 127.0.9.1 --port 30090 "
                           "--policy cache_aware")
    assert lines[-2] == "boots: 3 (one per point)"


def test_a_sweep_with_pd_layouts_is_not_estimated_from_a_fitted_profile(tmp_path: Path) -> None:
    """The planner predicts one serve group's layout; a P/D sweep falls back to its bound."""
    from pytest_ppsweep.planner.data import load_measured
    from pytest_ppsweep.planner.fitting import fit

    sweep = load(REPO / "tests" / "data" / "pd" / "pd.toml")
    reports = tmp_path / "reports"
    profile = reports / f"{sweep.name}-20261201-090000" / "planner" / "profile.json"
    fit(load_measured([REPO / "benchmarks" / "data" / "seeds_medians.csv"])).write(profile)
    est = cluster_time(sweep, sweep.configs, reports, sweep.cluster(None))
    assert est.bound and "3 boot(s)" in est.source
