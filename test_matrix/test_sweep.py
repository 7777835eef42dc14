"""Acceptance tests of one layout (the seeds' checklist, §3.1 and §6).

Order matters and is kept: topology right after boot, then the benchmark at each concurrency,
then the log scan and the memory snapshot of what the benchmark left.

These are plain assertions: rename, rewrite or add tests as you like. The plugin itself records
what the report and ``--ppsweep-resume`` need (topology, log scan, memory, each test's outcome).
"""

from __future__ import annotations

import warnings

import pytest

from pytest_ppsweep import (
    Booted,
    Config,
    ProfileError,
    SweepRun,
    TraceError,
    accuracy_problems,
    completion_problems,
    log_problems,
    outputs_problems,
    profile_problems,
    regression_problems,
    repeat_median,
    replaced_rounds,
    slo_regression_problems,
    topology_problems,
    validity_problems,
    worst_rank,
)


def test_topology(
    ppsweep: SweepRun,
    ppsweep_service: Booted,
    ppsweep_config: Config,
    record_property: pytest.RecordProperty,
) -> None:
    """PP, TP, EP and the MoE backends are what the matrix asked; the micro-batch size is known.
    A layout of several server groups (P/D): every group's, each from its own head node."""
    server = ppsweep.server_args(ppsweep_config)
    topo = ppsweep_service.topology
    record_property("pp_max_micro_batch_size", topo.pp_max_micro_batch_size)
    problems = topology_problems(ppsweep_config, server, topo, ppsweep_service.nodes,
                                 groups=ppsweep_service.group_topologies)
    assert not problems, "\n".join(problems)


def test_prefill(
    ppsweep: SweepRun,
    ppsweep_service: Booted,
    ppsweep_config: Config,
    concurrency: int,
    record_property: pytest.RecordProperty,
) -> None:
    """Every repeat completes N/N requests with zero errors; TPS and TTFT are recorded."""
    rounds = ppsweep.run_rounds(ppsweep_service, concurrency)
    for metric in ("input_tps", "ttft_p50_s"):
        if (median := repeat_median(rounds, metric)) is not None:
            record_property(metric, median)  # median over repeats, as the summary's
    # one round that missed N/N was replaced while the layout was up: kept, and a warning
    keep = ppsweep.sweep.min_repeats
    for line in replaced_rounds(ppsweep_config.id, concurrency, rounds, keep):
        warnings.warn(f"replaced round: {line}", UserWarning, stacklevel=1)
    problems = completion_problems(ppsweep_config.id, concurrency, rounds, keep)
    assert not problems, "\n".join(problems) + "\n" + ppsweep_service.evidence()


@pytest.mark.ppsweep_slo
def test_slo(
    ppsweep: SweepRun,
    ppsweep_service: Booted,
    ppsweep_config: Config,
    record_property: pytest.RecordProperty,
) -> None:
    """The highest load within the workload's SLO ([workload.slo]) on this one boot: bounded
    probes, the final load repeated; every probe in slo_probes.csv as it ends. Fails when no
    load of the searched range is within the SLO, or the final load did not hold on repeat."""
    outcome = ppsweep.slo_search(ppsweep_service)
    record_property("slo_load_low", outcome.low)
    record_property("slo_load_high", outcome.high)
    record_property("slo_search", outcome.text())
    if outcome.low is None:  # an answer, not a failure: the SLO answer says how far it is
        warnings.warn(f"{ppsweep_config.id}: no load within the SLO: {outcome.text()}",
                      UserWarning, stacklevel=1)
        return
    assert outcome.confirmed, f"{ppsweep_config.id}: not confirmed on repeat: {outcome.text()}"


@pytest.mark.ppsweep_always
@pytest.mark.ppsweep_gate
@pytest.mark.ppsweep_slo
def test_slo_no_regression(ppsweep: SweepRun, ppsweep_config: Config) -> None:
    """Gate (with --ppsweep-compare and an SLO): the layout's highest load within the SLO did
    not fall beyond noise against the reference run."""
    if ppsweep.compare_ref is None:
        pytest.skip("no reference run: pass --ppsweep-compare RUN_OR_BASELINE to gate")
    bad = slo_regression_problems(ppsweep.store.dir, ppsweep.compare_ref, ppsweep_config.id)
    assert not bad, "\n".join(bad)


@pytest.mark.ppsweep_verdict  # on --ppsweep-resume: judged again from the run folder
@pytest.mark.usefixtures("ppsweep_service")  # while the layout is up, after its benchmark
def test_valid(ppsweep: SweepRun, ppsweep_config: Config, concurrency: int) -> None:
    """The point's verdict, from the run folder so far, is VALID: every repeat N/N with the
    prompt tokens the server counted equal to those sent, the Input TPS spread within
    spread_threshold (a warning with ``[sweep] spread_rule = "warn"``), at least min_repeats
    repeats, booted with the requested topology. Every reason is listed."""
    validity = validity_problems(ppsweep.store.dir, ppsweep_config.id, concurrency)
    for note in validity.warnings:
        why = "replaced round" if note.endswith("(replaced)") else "spread_rule = 'warn'"
        warnings.warn(f"{why}: {note}", UserWarning, stacklevel=1)
    assert not validity.problems, "\n".join(validity.problems)


def test_outputs_match(
    ppsweep: SweepRun,
    ppsweep_service: Booted,
    ppsweep_config: Config,
    record_property: pytest.RecordProperty,
) -> None:
    """The layout computes what the others compute ([correctness]; off with ``enabled =
    false``): a few fixed prompts, greedy with their logprobs, once per boot, into
    outputs/<layout>.json. The tokens equal the reference layout's (the baseline's) and, with
    --ppsweep-compare, the reference run's, up to a divergence after a near-tie; a matched
    token's logprob within the tolerance. A disagreement names the prompt, the first differing
    position, both tokens and both logprobs."""
    if not ppsweep.sweep.correctness.enabled:
        pytest.skip("[correctness] enabled = false: no outputs probe")
    record_property("outputs", str(ppsweep.probe_outputs(ppsweep_service)))
    problems = outputs_problems(ppsweep.store.dir, ppsweep_config.id, ppsweep.compare_ref)
    assert not problems, "\n".join(problems)


@pytest.mark.ppsweep_accuracy
def test_accuracy(
    ppsweep: SweepRun,
    ppsweep_service: Booted,
    ppsweep_config: Config,
    record_property: pytest.RecordProperty,
) -> None:
    """The layout answers the [accuracy] task file as well as the others (collected only with an
    [accuracy] table): the questions greedy through the server's API, once per boot, into
    accuracy/<layout>.json. It fails below min_score, significantly below the run's reference
    layout (parallelism must not change accuracy) or, with --ppsweep-compare, below the
    threshold against the baseline run's score; the message names both scores, their
    intervals, n and the threshold."""
    record_property("accuracy", str(ppsweep.check_accuracy(ppsweep_service)))
    problems = accuracy_problems(ppsweep.store.dir, ppsweep_config.id, ppsweep.compare_ref)
    assert not problems, "\n".join(problems)


@pytest.mark.ppsweep_profile
def test_profile(
    ppsweep: SweepRun,
    ppsweep_service: Booted,
    ppsweep_config: Config,
    record_property: pytest.RecordProperty,
) -> None:
    """Profile window (--ppsweep-profile or [profile]; seeds §9.3): one extra round, kept out of
    the medians, wrapped by SGLang's /start_profile and /stop_profile. Every rank's trace comes
    back from its node into profile/<layout>/ and parses; every rank took part (collective
    calls in its window). A missing trace names its node; a bad one names its file."""
    try:
        profile = ppsweep.profile_round(ppsweep_service)
    except (ProfileError, TraceError) as exc:  # a node's trace missing, or one unreadable
        failure = str(exc)
    else:
        failure = ""
    if failure:
        pytest.fail(failure, pytrace=False)
    record_property("all_reduce_calls", profile.calls.get("all_reduce", 0))
    record_property("all_reduce_ms", round(profile.cumulative_ms.get("all_reduce", 0.0), 3))
    record_property("exposed_comm_share", round(profile.exposed_share, 4))
    record_property("overlap_ratio", round(profile.overlap_ratio, 4))
    problems = profile_problems(profile, ppsweep_config)
    assert not problems, "\n".join(problems)


def test_logs_clean(ppsweep_service: Booted) -> None:
    """No node's log shows CUDA OOM, a Traceback, NCCL/Gloo/RDMA failures, a watchdog timeout,
    an engine failure or a refused connection."""
    findings = ppsweep_service.findings()
    assert not findings, (
        "fatal lines in the service logs:\n"
        + "\n".join(log_problems(findings))
        + "\n"
        + ppsweep_service.log_tail()
    )


def test_gpu_memory(
    ppsweep: SweepRun,
    ppsweep_service: Booted,
    ppsweep_config: Config,
    record_property: pytest.RecordProperty,
) -> None:
    """Worst-rank GPU memory after the benchmark is recorded with its headroom (seed §8)."""
    cluster = ppsweep_service.cluster
    if not cluster.nvidia_smi:
        pytest.skip(f"cluster {cluster.name!r} has no GPUs (nvidia_smi = [])")
    gpus = ppsweep.snapshot_gpus(cluster, ppsweep_config.id, "after")
    assert gpus, f"{ppsweep_config.id}: nvidia-smi reported no GPU on any node"
    worst = worst_rank(gpus)
    assert worst is not None, f"{ppsweep_config.id}: nvidia-smi reported no GPU on any node"
    record_property("mem_peak_mib", worst.used_mib)
    record_property("mem_headroom_mib", worst.headroom_mib)
    assert worst.used_mib <= worst.total_mib, f"{worst.node} GPU {worst.index}: used > total"


@pytest.mark.ppsweep_always
@pytest.mark.ppsweep_gate
def test_no_regression(ppsweep: SweepRun, ppsweep_config: Config, concurrency: int) -> None:
    """Gate (collected only with --ppsweep-compare): no metric worse than its threshold beyond
    the noise of both runs, and the layout still boots and completes N/N."""
    if ppsweep.compare_ref is None:
        pytest.skip("no reference run: pass --ppsweep-compare RUN_OR_BASELINE to gate")
    # each regression, then what else differs from the reference's point (image, flags, env)
    problems = regression_problems(ppsweep.store.dir, ppsweep.compare_ref, ppsweep.thresholds,
                                   ppsweep_config.id, concurrency)
    assert not problems, "\n".join(problems)


@pytest.mark.ppsweep_comm
def test_comm(
    ppsweep: SweepRun, ppsweep_config: Config, record_property: pytest.RecordProperty
) -> None:
    """With --ppsweep-comm or a [comm] table (seeds §9.2): after the layout's benchmark, with its
    service stopped (or never booted), every distinct TP domain runs an all-reduce sweep
    (latency, algbw, busbw = algbw × 2(n−1)/n) that completes with the right sums; a wrong sum,
    a hang or an init failure fails with the node and rank."""
    if ppsweep_config.tp < 2:
        pytest.skip(f"{ppsweep_config.id}: TP{ppsweep_config.tp} has no all-reduce")
    runs = ppsweep.comm(ppsweep_config)
    assert runs, f"{ppsweep_config.id}: no TP domain was benchmarked"
    for run in runs:
        times = [float(r["time_us"]) for r in run.rows]
        record_property(f"comm_{run.domain.name}_max_us", times[-1])
        assert all(t > 0 for t in times), f"{run.domain.name}: a non-positive latency: {times}"
