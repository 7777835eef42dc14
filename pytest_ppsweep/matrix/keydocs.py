"""What each key of a sweep file is: its type, its default and one line of meaning, table by
table, beside the key lists the parser refuses other keys by (matrix/schema.py and each table's
spec module).

tools/make_reference.py renders docs/REFERENCE.md from :func:`tables`; a key in a table's key
list with no :class:`KeyDoc` here (or a KeyDoc for a key the table does not take) makes the
reference fail to render, so a key cannot be added without its line. A default given as a value
is the one the parser uses when the key is absent (tests/matrix/test_keydocs.py records the
parser's typed reads of every shipped sweep and checks each such value, and each ``≥``/``≤``
bound of a type, against them); a default that depends on other keys is :class:`Computed`,
saying what it is computed from.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ppsweep.engine.engines import DEFAULT_ENGINE, engine_of
from pytest_ppsweep.matrix import (
    accuracyspec,
    commspec,
    correctnessspec,
    expectspec,
    schema,
    slospec,
)
from pytest_ppsweep.matrix import kinds as kinds_mod

__all__ = ["Computed", "KeyDoc", "Table", "literal", "problems", "tables"]


@dataclass(frozen=True)
class Computed:
    """A default that is no fixed value: what it is computed from, or "required", or none."""

    text: str


REQUIRED = Computed("required")
NONE = Computed("none")


@dataclass(frozen=True)
class KeyDoc:
    """One key: its TOML type (with the bounds the parser enforces), its default (a value, or
    :class:`Computed`) and what it does."""

    type: str
    default: Any
    meaning: str


@dataclass(frozen=True)
class Table:
    """One table of the sweep file: its heading, the keys the parser takes (read from the key
    list at call time), their docs, a note, and ``where``: the dotted names its Reader has
    (``*`` any one name or index)."""

    title: str
    keys: tuple[str, ...]
    docs: Mapping[str, KeyDoc]
    where: tuple[str, ...]
    note: str = ""


def literal(value: Any) -> str:
    """``value`` as TOML writes it (a whole float without its ``.0``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise TypeError(f"no TOML literal for {value!r}")


def shown_default(doc: KeyDoc) -> str:
    """The default as the reference shows it: a value as TOML, else its text."""
    return doc.default.text if isinstance(doc.default, Computed) else f"`{literal(doc.default)}`"


_S = "string"
_DEFAULT = engine_of(DEFAULT_ENGINE)  # the default engine's choices, shown as examples
_F = "true or false"
_STRS = "list of strings"

TOP_DOCS: Mapping[str, KeyDoc] = {
    "extends": KeyDoc("string or list of strings", NONE,
                      "shared files whose clusters, server, env and workload tables this sweep "
                      "takes; its own keys win"),
    "sweep": KeyDoc("table", REQUIRED, "the sweep itself ([sweep] below)"),
    "server": KeyDoc("table", NONE, "engine flags of every rank: `key = value` → `--key value`, "
                     "`true` → a bare flag"),
    "env": KeyDoc("table of strings", NONE, "environment of every rank"),
    "configs": KeyDoc("array of tables",
                      Computed("required without axes, rules or several workloads"),
                      "the layouts swept ([[configs]] below)"),
    "workload": KeyDoc("table", Computed("required unless [workloads] names workloads"),
                       "the load each point is measured under; with [workloads], their common "
                       "keys"),
    "clusters": KeyDoc("table of tables", REQUIRED, "the clusters, by name ([clusters.NAME])"),
    "profile": KeyDoc("table", NONE, "the profile window (docs/guides/profiling.md)"),
    "axes": KeyDoc("table", NONE, "further axes of the sweep (docs/guides/axes.md)"),
    "exclude": KeyDoc("array of tables", NONE, "points left out of the axes' product"),
    "include": KeyDoc("array of tables", NONE, "points added to the axes' product"),
    "workloads": KeyDoc("table of tables", NONE, "named workloads, each over [workload]'s keys"),
    "compare": KeyDoc("table", NONE, "how layouts are compared and decided"),
    "comm": KeyDoc("table", NONE, "the all-reduce microbenchmark per TP domain (`test_comm`)"),
    "correctness": KeyDoc("table", NONE, "the outputs probe of `test_outputs_match`"),
    "expect": KeyDoc("array of tables", NONE, "failures the sweep expects, reported as xfail"),
    "accuracy": KeyDoc("table", NONE, "the task score of `test_accuracy`"),
    "router": KeyDoc("table", NONE, "the router of every P/D layout ([router] below), unless "
                     "its own [configs.router] says otherwise"),
}

SWEEP_DOCS: Mapping[str, KeyDoc] = {
    "name": KeyDoc(_S, Computed("the sweep file's name without `.toml`"),
                   "the sweep's name in its results and reports"),
    "image": KeyDoc(_S, "", "the container image the ranks run in (docker launcher; "
                    "`--ppsweep-image` overrides)"),
    "model_path": KeyDoc(_S, REQUIRED, "the model the engine serves"),
    "baseline": KeyDoc(_S, Computed("the first configuration"),
                       "the layout deltas are computed against: an id, `ppN` or `ppN-tpM`"),
    "cluster": KeyDoc(_S, Computed("the first [clusters] table"),
                      "the cluster used unless `--ppsweep-cluster` names others"),
    "ep_cap": KeyDoc("integer ≥ 1", Computed("none: EP 1 unless a configuration sets `ep`"),
                     "EP = min(ep_cap, TP) unless a configuration sets `ep`"),
    "devices": KeyDoc(_STRS, [], "devices mapped into every container (docker launcher)"),
    "boot_timeout_s": KeyDoc("number ≥ 0.001", 1800.0,
                             "real seconds a layout has to become healthy"),
    "health_stall_s": KeyDoc("number ≥ 0.1", 30.0, "real seconds a rank ≥ 1 may leave /health "
                             "unanswered before the layout is called dead"),
    "spread_threshold": KeyDoc("number ≥ 0", 0.02, "(max − min) / median of a point's primary "
                               "metric over its repeats above which `spread_rule` applies"),
    "min_repeats": KeyDoc("integer ≥ 1", Computed("the workload's `repeats`"),
                          "the valid rounds nearest the median that the spread is taken over"),
    "max_repeats": KeyDoc("integer ≥ 1", Computed("8, or the workload's `repeats` when more"),
                          "rounds of a point in all, extra rounds included (at least `repeats`)"),
    "boots": KeyDoc("integer ≥ 1", 1, "boots of each layout in one run, all first boots before "
                    "any second (`--ppsweep-boots`)"),
    "spread_rule": KeyDoc('"fail" or "warn"', "fail", "a spread above `spread_threshold`: the "
                          "point is INVALID and fails `test_valid`, or a warning only"),
    "fatal_patterns": KeyDoc("list of regexes", [],
                             "extra log lines the log scan takes as fatal, beside the engine's"),
    "thresholds": KeyDoc(_STRS, [], "the gate's thresholds when no `--ppsweep-threshold` is "
                         "given"),
    "max_points": KeyDoc("integer ≥ 1", 64, "the most points the axes may make; a larger "
                         "product is refused"),
    "a2a_ep_backends": KeyDoc(_STRS, Computed("the engine's list"),
                              "the all-to-all backends with which the engine sets EP = TP"),
    "engine": KeyDoc(_S, DEFAULT_ENGINE, "the serving engine"),
    "gpu_hour_usd": KeyDoc("number > 0", NONE,
                           "dollars per GPU-hour: the reports' cost per million tokens"),
    "transfer_backend": KeyDoc(_S, Computed(f"the engine's first ({DEFAULT_ENGINE}: "
                                            f"`{literal(_DEFAULT.transfer_backends[0])}`)"),
                               "how a P/D layout's decode servers get the KV its prefill servers "
                               f"computed: one of the engine's backends ({DEFAULT_ENGINE}: "
                               + ", ".join(f"`{b}`" for b in _DEFAULT.transfer_backends) + ")"),
}

CONFIG_DOCS: Mapping[str, KeyDoc] = {
    "pp": KeyDoc("integer ≥ 1", REQUIRED, "pipeline-parallel size"),
    "tp": KeyDoc("integer ≥ 1", REQUIRED, "tensor-parallel size"),
    "ep": KeyDoc("integer ≥ 1", Computed("min(`ep_cap`, TP), or 1 without `ep_cap`"),
                 "expert-parallel size"),
    "server": KeyDoc("table", NONE, "engine flags of this layout only, over [server]"),
    "env": KeyDoc("table of strings", NONE, "environment of this layout's ranks, over [env]"),
    "prefill": KeyDoc("table", Computed("none; with `decode`, instead of pp/tp/ep"),
                      "the prefill servers of a P/D layout ([configs.prefill] below)"),
    "decode": KeyDoc("table", Computed("none; with `prefill`, instead of pp/tp/ep"),
                     "the decode servers of a P/D layout ([configs.decode] below)"),
    "router": KeyDoc("table", Computed("[router]"), "this P/D layout's router, over [router] "
                     "key by key"),
}

ROLE_DOCS: Mapping[str, KeyDoc] = {
    "pp": KeyDoc("integer ≥ 1", 1, "pipeline-parallel size of each server of the role"),
    "tp": KeyDoc("integer ≥ 1", REQUIRED, "tensor-parallel size of each server of the role"),
    "ep": KeyDoc("integer ≥ 1", Computed("min(`ep_cap`, TP), or 1 without `ep_cap`"),
                 "expert-parallel size of each server of the role"),
    "dp": KeyDoc("integer ≥ 1", 1, "data-parallel replicas in each server (its GPUs: "
                 "PP × TP × DP)"),
    "servers": KeyDoc("integer ≥ 1", 1, "servers of the role (the x and y of xPyD), each on "
                      "nodes of its own"),
    "nodes": KeyDoc("integer ≥ 1", Computed("as many as a server's GPUs fill"),
                    "nodes of each server of the role"),
    "server": KeyDoc("table", NONE, "engine flags of this role's servers only, over the "
                     "layout's and [server]"),
}

ROUTER_DOCS: Mapping[str, KeyDoc] = {
    "port": KeyDoc("integer ≥ 1, ≤ 65535", schema.ROUTER_PORT,
                   "the router's port, where the benchmark sends its requests"),
    "node": KeyDoc("integer ≥ 0", 0, "the cluster's node (index in its hosts) the router runs "
                   "on"),
    "policy": KeyDoc(_S, Computed(f"the router's default ({DEFAULT_ENGINE}: "
                                  f"`{literal(_DEFAULT.router_policies[0])}`)"),
                     "how the router spreads requests over a role's servers: one of the "
                     f"engine's policies ({DEFAULT_ENGINE}: "
                     + ", ".join(f"`{p}`" for p in _DEFAULT.router_policies) + ")"),
}

WORKLOAD_DOCS: Mapping[str, KeyDoc] = {
    "dataset": KeyDoc(_S, "random-ids", "the prompts' dataset (`random-ids` only)"),
    "input_len": KeyDoc("integer ≥ 1", Computed("required (trace: the trace's mean)"),
                        "prompt length in tokens"),
    "output_len": KeyDoc("integer ≥ 1", Computed("required (trace: the trace's mean)"),
                         "tokens generated per request"),
    "range_ratio": KeyDoc("number ≥ 0, at most 1", 1.0,
                          "bench_serving's range ratio of the lengths"),
    "concurrency": KeyDoc("integer or list of integers ≥ 1",
                          Computed("required with no `request_rate`; else `num_requests`"),
                          "requests in flight: one point per value"),
    "num_requests": KeyDoc("integer ≥ 1", Computed("required (trace: the trace's requests)"),
                           "requests per round"),
    "repeats": KeyDoc("integer ≥ 1", 3, "planned rounds of each point"),
    "seed": KeyDoc("integer ≥ 0", 1, "seed of the generated prompts"),
    "vocab_size": KeyDoc("integer ≥ 2", 32000, "token ids of random prompts are below it"),
    "warmup_requests": KeyDoc("integer ≥ 0", 1,
                              "requests sent before a booted layout's first round"),
    "api": KeyDoc('"generate" or "completions"', "generate", "the server API the load uses"),
    "request_timeout_s": KeyDoc("number ≥ 0.001", 3600.0, "seconds one request may take"),
    "round_timeout_s": KeyDoc("number ≥ 0.001", 7200.0, "seconds one round may take"),
    "request_rate": KeyDoc('number > 0 or "inf"', Computed('"inf" (all at once)'),
                           "Poisson arrivals at this many requests per second"),
    "burstiness": KeyDoc("number > 0", 1.0, "bench_serving's burstiness of the arrivals"),
    "slo": KeyDoc("table", NONE, "the SLO and its load search ([workload.slo] below)"),
    "objective": KeyDoc("string or list of 2 strings", Computed("from the workload's shape"),
                        "the metric answers rank by, and an optional tie-break: one of "
                        + ", ".join(f"`{m}`" for m in schema.OBJECTIVE_METRICS)),
    "type": KeyDoc('"random-ids", "trace" or "shared_prefix"', "random-ids",
                   "random prompts, a Mooncake trace replayed, or prompts with a shared prefix"),
    "path": KeyDoc(_S, Computed("required with `type = \"trace\"`"),
                   "the trace file, relative to the sweep file"),
    "time_scale": KeyDoc("number > 0", 1.0, "factor on the trace's timestamps"),
    "prefix_len": KeyDoc("integer ≥ 1", Computed("required with `type = \"shared_prefix\"`"),
                         "tokens of the shared prefix (below `input_len`)"),
    "prefix_share": KeyDoc("number ≥ 0, at most 1",
                           Computed("required with `type = \"shared_prefix\"`"),
                           "share of the requests that carry the shared prefix"),
    "hit_tolerance": KeyDoc("number ≥ 0, at most 1", 0.05, "how far the measured prefix hit rate "
                            "may be from the implied one before it is flagged"),
}


def _slo_docs() -> dict[str, KeyDoc]:
    out: dict[str, KeyDoc] = {}
    for metric in slospec.METRICS:
        for q in slospec.PERCENTILES:
            out[f"{metric}_p{q}_s"] = KeyDoc(
                "number ≥ 0", NONE,
                f"seconds: the round's p{q} {metric.upper()} over completed requests must be at "
                "most this")
    for metric in slospec.METRICS:
        out[f"{metric}_s"] = KeyDoc("number ≥ 0", NONE, f"seconds: a request is good only if "
                                    f"its {metric.upper()} is at most this")
    out.update({
        "search": KeyDoc('"rate" or "concurrency"', "rate",
                         "what the search varies: requests per second (open loop) or C"),
        "min": KeyDoc("number ≥ 0 (concurrency: integer ≥ 1)", REQUIRED,
                      "the low end of the load searched"),
        "max": KeyDoc("number ≥ 0 (concurrency: integer ≥ 1)", REQUIRED,
                      "the high end of the load searched"),
        "precision": KeyDoc("number ≥ 0", Computed("(max − min) / 16; concurrency: 1"),
                            "the search stops when the bracket is this narrow"),
        "max_probes": KeyDoc(f"integer ≥ 2, ≤ {slospec.MAX_PROBES_CAP}", 8,
                             "the most probes before the repeats at the final load"),
        "max_concurrency": KeyDoc("integer ≥ 0", 0,
                                  "cap on requests in flight while searching a rate (0: none)"),
        "attainment": KeyDoc("number ≥ 0", 1.0, "the share of good requests a round needs"),
        "confidence": KeyDoc("number ≥ 0", slospec.DEFAULT_CONFIDENCE,
                             "confidence of the binomial bound a percentile limit is judged by"),
        "trim": KeyDoc("number ≥ 0, below 0.5", 0.1, "share of a probe's requests left out of its "
                       "percentiles at each end (warm-up and drain)"),
        "precision_pct": KeyDoc("number ≥ 0", 10.0, "refine probes go on until the capacity's "
                                "interval is within ± this % of it"),
        "max_refine": KeyDoc(f"integer ≥ 0, ≤ {slospec.MAX_PROBES_CAP}", 16,
                             "the most refine probes (0: none)"),
        "requests": KeyDoc('integer ≥ 1 or "auto"', Computed("the workload's `num_requests`"),
                           "requests every probe sends; \"auto\": sized from the first probe"),
    })
    return out


SLO_DOCS: Mapping[str, KeyDoc] = _slo_docs()

COMPARE_DOCS: Mapping[str, KeyDoc] = {
    "baseline": KeyDoc("table", NONE,
                       "axis values that make a point its comparison group's baseline"),
    "alpha": KeyDoc("number in (0, 0.5]", 0.05,
                    "the decisions' significance level, family-wise over a question"),
    "min_effect_pct": KeyDoc("number in (0, 100)", 1.0, "the equivalence margin, in %"),
    "sequential": KeyDoc(_F, False, "decide sequentially (docs/guides/decisions.md)"),
    "boot_noise_pct": KeyDoc("number in [0, 100)", NONE, "a stated σ, in %, of one boot's "
                             "offset, used when the run measured none"),
    "one_boot_bound_pct": KeyDoc("number in (0, 100)", 5.0, "how far an interval measured "
                                 "within one boot per layout must clear 0 to be plain decided"),
}

PROFILE_DOCS: Mapping[str, KeyDoc] = {
    "layouts": KeyDoc(_STRS, [], "the layouts profiled (selectors, as `--ppsweep-config`)"),
    "concurrency": KeyDoc("integer ≥ 1", Computed("the workload's largest"),
                          "the concurrency of the profiled round (one of the workload's)"),
    "num_requests": KeyDoc("integer ≥ 1", Computed("the workload's `num_requests`"),
                           "requests of the profiled round"),
    "num_steps": KeyDoc("integer ≥ 1", 3, "engine steps profiled"),
    "activities": KeyDoc("list of " + ", ".join(f'"{a}"' for a in schema.PROFILE_ACTIVITIES),
                         ["CPU", "GPU"], "what the profiler records"),
    "output_dir": KeyDoc(_S, "/tmp/ppsweep-profile", "where the server writes its traces"),
    "timeout_s": KeyDoc("number ≥ 0.001", 120.0, "seconds the profile may take"),
}

COMM_DOCS: Mapping[str, KeyDoc] = {
    "min_size": KeyDoc('integer or string ("1K", "256M")', Computed("1K"),
                       "smallest size swept (bytes), doubling up to `max_size`"),
    "max_size": KeyDoc('integer or string ("1K", "256M")', Computed("256M"),
                       "largest size swept (bytes)"),
    "sizes": KeyDoc("list of sizes", NONE, "an explicit list instead of min_size/max_size"),
    "warmup_iters": KeyDoc("integer ≥ 0, ≤ 10000", 5, "untimed all-reduces per size"),
    "iters": KeyDoc("integer ≥ 1, ≤ 100000", 20, "timed all-reduces per size"),
    "backend": KeyDoc('"auto", "nccl" or "gloo"', "auto", "`auto`: NCCL with CUDA, else gloo"),
    "timeout_s": KeyDoc("number ≥ 0.5", 300.0,
                        "no progress for this long on a rank fails the domain"),
    "tool": KeyDoc('"torch" or "nccl-tests"', "torch", "the shipped worker or nccl-tests"),
    "all_reduce_perf": KeyDoc(_S, "", "path of nccl-tests' binary on the nodes "
                              "(`tool = \"nccl-tests\"`)"),
    "mpirun": KeyDoc(_STRS, [], "argv prefix that starts `all_reduce_perf` across nodes"),
    "master_port": KeyDoc("integer ≥ 1, ≤ 65535", Computed("the cluster's `dist_init_port` + 1"),
                          "rendezvous port of the worker on node 0"),
}

CORRECTNESS_DOCS: Mapping[str, KeyDoc] = {
    "enabled": KeyDoc(_F, True, "run the probe (`test_outputs_match`)"),
    "prompts": KeyDoc("list of strings or of lists of token ids",
                      Computed(f"{len(correctnessspec.DEFAULT_PROMPTS)} short texts"),
                      "the prompts: each a text or token ids"),
    "max_new_tokens": KeyDoc("integer ≥ 1, ≤ 4096", 8,
                             "tokens generated per prompt (greedy, `ignore_eos`)"),
    "top_logprobs": KeyDoc("integer ≥ 2, ≤ 100", 5, "top logprobs kept per position"),
    "logprob_tolerance": KeyDoc("number ≥ 0", correctnessspec.DEFAULT_LOGPROB_TOLERANCE,
                                "how far a matched token's logprob may move (nats)"),
    "tie_margin": KeyDoc("number ≥ 0", Computed("2 × `logprob_tolerance`"),
                         "reference top-1 − top-2 below this is a near-tie (nats)"),
    "timeout_s": KeyDoc("number ≥ 0.1", 120.0, "seconds per request"),
}

ACCURACY_DOCS: Mapping[str, KeyDoc] = {
    "tasks": KeyDoc(_S, REQUIRED, "the JSONL task file (`prompt`/`answer` lines), relative to "
                    "the sweep file"),
    "metric": KeyDoc('"exact" or "regex"', "exact",
                     "the answer equals the completion, or the `regex`'s match in it"),
    "regex": KeyDoc(_S, "", "the extraction of `metric = \"regex\"` (Python `re`)"),
    "few_shot": KeyDoc("integer ≥ 0, ≤ 64", 0,
                       "the file's first lines shown before every question, and not asked"),
    "questions": KeyDoc("integer ≥ 1, ≤ 1000000",
                        Computed("from `min_drop`, `alpha` and `beta`"), "how many are asked"),
    "min_drop": KeyDoc("number ≥ 0.1", 3.0, "θ: the smallest drop of the score to detect "
                       "(points)"),
    "alpha": KeyDoc("number", 0.05, "the comparison's false-fail rate"),
    "beta": KeyDoc("number", 0.2, "the comparison's miss rate at a drop of θ"),
    "min_score": KeyDoc("number ≥ 0", 0.0, "a layout scoring below it fails (points)"),
    "backend": KeyDoc('"builtin" or "lm-eval"', "builtin",
                      "the plugin's client or lm-eval's `local-completions` model"),
    "max_tokens": KeyDoc("integer ≥ 1, ≤ 4096", 32, "tokens generated per question"),
    "stop": KeyDoc(_STRS, ["\n"], "the completion is cut at the first of these"),
    "concurrency": KeyDoc("integer ≥ 1, ≤ 256", 8, "requests in flight"),
    "timeout_s": KeyDoc("number ≥ 0.1", 120.0, "seconds per request"),
}

EXPECT_DOCS: Mapping[str, KeyDoc] = {
    "layout": KeyDoc(_S, "*", "a glob on the layout ids the expectation covers"),
    "failure": KeyDoc(" or ".join(f'"{f}"' for f in expectspec.FAILURES), REQUIRED,
                      "the kind of failure expected"),
    "reason": KeyDoc(_S, REQUIRED, "why it is expected (the xfail's reason)"),
}

CLUSTER_DOCS: Mapping[str, KeyDoc] = {
    "kind": KeyDoc(" or ".join(f'"{k}"' for k in kinds_mod.CLUSTER_KINDS), REQUIRED,
                   "where the nodes are and how they are reached"),
    "launcher": KeyDoc(" or ".join(f'"{k}"' for k in kinds_mod.LAUNCHERS), "process",
                       "ranks as processes, or as containers of [sweep] image"),
    "hosts": KeyDoc("array of tables or list of strings",
                    Computed("required unless the kind's nodes are allocated"),
                    "the nodes, in rank order"),
    "gpus_per_node": KeyDoc("integer ≥ 1", REQUIRED, "GPUs of each node"),
    "server_module": KeyDoc("Python module name", Computed("the engine's server module"),
                            "the module each rank runs with `python -m`"),
    "port": KeyDoc("integer ≥ 1, ≤ 65535", 30000, "the server's HTTP port"),
    "bootstrap_port": KeyDoc("integer ≥ 1, ≤ 65535", 8998,
                             "the first prefill server's KV bootstrap port in a P/D layout; the "
                             "next servers' count up from it"),
    "dist_init_port": KeyDoc("integer ≥ 1, ≤ 65535", 20000,
                             "the ranks' distributed rendezvous port"),
    "nvidia_smi": KeyDoc(_STRS, ["nvidia-smi"],
                         "argv that reads the GPUs ([]: no GPUs, the memory test skips)"),
    "env": KeyDoc("table of strings", NONE, "environment of this cluster's ranks"),
    "python": KeyDoc(_S, "", "the interpreter the ranks run"),
    "ssh_user": KeyDoc("user name", "root", "the SSH user"),
    "ssh_key": KeyDoc(_S, "", "the SSH private key"),
    "known_hosts": KeyDoc(_S, "", "the SSH known_hosts file"),
    "verify_host_keys": KeyDoc(_F, True, "check the hosts' SSH keys"),
    "sudo_password_file": KeyDoc(_S, "", "a file holding the sudo password"),
    "shm_size": KeyDoc(_S, "32g", "the containers' /dev/shm size (docker launcher)"),
    "mounts": KeyDoc(_STRS, [], "mounts of the containers (docker launcher; Slurm: Pyxis "
                     "`--container-mounts`)"),
}

SLURM_DOCS: Mapping[str, KeyDoc] = {
    "nodes": KeyDoc("integer ≥ 1", REQUIRED, "nodes of the allocation"),
    "jobid": KeyDoc("digits", NONE, "an allocation taken as it is (none: one is made with "
                    "salloc)"),
    "partition": KeyDoc(_S, NONE, "the partition salloc asks"),
    "account": KeyDoc(_S, NONE, "the account salloc charges"),
    "time": KeyDoc("Slurm time", NONE, "the allocation's time limit"),
    "request_gpus": KeyDoc(_F, True, "salloc `--gpus-per-node <gpus_per_node>`"),
    "salloc_options": KeyDoc(_STRS, [], "extra salloc arguments"),
    "srun_options": KeyDoc(_STRS, [], "extra srun arguments"),
    "container_image": KeyDoc(_S, "", "Pyxis: srun `--container-image`"),
    "login": KeyDoc("host name or address", NONE,
                    "the login node the Slurm commands run on, over SSH (none: this host)"),
    "exclusive": KeyDoc(_F, True, "salloc `--exclusive`"),
    "cpus_per_task": KeyDoc("integer ≥ 0", 0,
                            "CPUs a step asks for (0: every CPU the allocation has on the node)"),
    "mem": KeyDoc("Slurm memory size", Computed("`\"0\"`: all of the node's memory"),
                  "salloc/srun `--mem`"),
    "gres": KeyDoc(_S, NONE, "salloc/srun `--gres` instead of `--gpus-per-node`"),
    "on_limit": KeyDoc('"renew" or "stop"', "renew", "at the time limit or a node failure: a new "
                       "allocation, or stop (resumable)"),
    "time_margin_s": KeyDoc("integer ≥ 0", 120,
                            "seconds kept beyond a layout's ETA before the allocation's end"),
    "container_cache": KeyDoc("absolute path", Computed("`\"/tmp/ppsweep-containers\"`"),
                              "Pyxis: where each node keeps the imported image"),
}

HOST_DOCS: Mapping[str, KeyDoc] = {
    "name": KeyDoc("host name", Computed("its address"), "the node's name"),
    "address": KeyDoc("host name or IP address", REQUIRED,
                       "the address the node's rank binds and is reached at"),
}

_KIND_DOCS: Mapping[str, Mapping[str, KeyDoc]] = {"slurm": SLURM_DOCS}


def tables() -> list[Table]:
    """Every table of the sweep file, with the keys its parser takes now (read from the key
    lists at each call, so a key added to one shows here)."""
    out = [
        Table("top level", schema.TOP_KEYS, TOP_DOCS, ("",)),
        Table("[sweep]", schema.SWEEP_KEYS, SWEEP_DOCS, ("sweep",)),
        Table("[[configs]]", schema.CONFIG_KEYS, CONFIG_DOCS, ("configs[*]",),
              "`server` and `env` are tables of the engine's flags and the ranks' environment. "
              "A P/D layout gives `prefill` and `decode` tables instead of pp/tp/ep; its id is "
              "`p{x}-{shape}-d{y}-{shape}` (`p1-pp4tp4ep4-d2-tp8ep4`: pp left out at 1, ep "
              "and dp only when > 1)."),
        Table("[configs.prefill] and [configs.decode]", schema.ROLE_KEYS, ROLE_DOCS,
              ("configs[*].prefill", "configs[*].decode"),
              "Each of the role's `servers` is a server group (`prefill0`, `prefill1`, …, "
              "`decode0`, …) on nodes of its own; the groups together fill the cluster."),
        Table("[router] and [configs.router]", schema.ROUTER_KEYS, ROUTER_DOCS,
              ("router", "configs[*].router"),
              "A P/D layout's router; each prefill server's bootstrap port is the cluster's "
              "`bootstrap_port` plus its index."),
        Table("[workload] and each [workloads.NAME]", schema.WORKLOAD_KEYS, WORKLOAD_DOCS,
              ("workload", "workloads.*")),
        Table("[workload.slo]", slospec.SLO_KEYS, SLO_DOCS, ("workload.slo", "workloads.*.slo"),
              "The limits are optional, at least one; see docs/guides/slo.md."),
        Table("[compare]", schema.COMPARE_KEYS, COMPARE_DOCS, ("compare",)),
        Table("[profile]", schema.PROFILE_KEYS, PROFILE_DOCS, ("profile",)),
        Table("[comm]", commspec.COMM_KEYS, COMM_DOCS, ("comm",)),
        Table("[correctness]", correctnessspec.CORRECTNESS_KEYS, CORRECTNESS_DOCS,
              ("correctness",)),
        Table("[accuracy]", accuracyspec.ACCURACY_KEYS, ACCURACY_DOCS, ("accuracy",),
              "Scores and drops are in points, 0–100."),
        Table("[[expect]]", expectspec.EXPECT_KEYS, EXPECT_DOCS, ("expect[*]",),
              "and any axis of the sweep, by name."),
        Table("[clusters.NAME], every kind", schema.CLUSTER_COMMON_KEYS, CLUSTER_DOCS,
              ("clusters.*",)),
    ]
    for kind, spec in kinds_mod.CLUSTER_KINDS.items():
        if spec.own_keys:
            out.append(Table(f"[clusters.NAME], kind = \"{kind}\" only", spec.own_keys,
                             _KIND_DOCS.get(kind, {}), ("clusters.*",)))
    out.append(Table("[[clusters.NAME.hosts]]", schema.HOST_KEYS, HOST_DOCS,
                     # a host given as a string is read on its cluster's table
                     ("clusters.*.hosts[*]", "clusters.*")))
    return out


def problems(given: Sequence[Table] | None = None) -> list[str]:
    """Each key of a table without its KeyDoc, and each KeyDoc of a key the table does not
    take; empty when every key has exactly its line."""
    out: list[str] = []
    for table in tables() if given is None else given:
        out += [f"{table.title}: key {k!r} has no KeyDoc (matrix/keydocs.py)"
                for k in table.keys if k not in table.docs]
        out += [f"{table.title}: KeyDoc {k!r} is of no key the table takes"
                for k in table.docs if k not in table.keys]
    return out
