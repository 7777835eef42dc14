"""Parse and validate a sweep file (``test_matrix/ppsweep.toml``) into the frozen model.

Everything a user can get wrong in the file is caught here, before anything is launched, and
reported as a :class:`~pytest_ppsweep.matrix.schema.MatrixError` that names the file, the key,
what was expected and what was found. The plugin turns it into ``pytest.UsageError``.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.matrix.model import Cluster, Config, Host, Sweep, Workload
from pytest_ppsweep.matrix.schema import (
    CLUSTER_KEYS,
    CONFIG_KEYS,
    HOST_KEYS,
    PLUGIN_OWNED_FLAGS,
    SPREAD_RULES,
    SWEEP_KEYS,
    TOP_KEYS,
    WORKLOAD_KEYS,
    MatrixError,
    Reader,
)


def load(path: Path, cluster: str | None = None, image: str | None = None) -> Sweep:
    """Read and validate ``path``.

    ``cluster`` names the cluster, or a comma-separated pool of clusters, the run uses (default:
    ``[sweep] cluster``); every layout must fit at least one of them.
    """
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MatrixError(f"{path}: sweep file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{path}: not valid TOML: {exc}") from None
    sweep = _build(Reader(path, raw, ""), path)
    if image:
        sweep = _replace_image(sweep, image)
    _check_against_pool(sweep, sweep.pool(cluster))
    return sweep


def _replace_image(sweep: Sweep, image: str) -> Sweep:
    return replace(sweep, image=image)


def _build(top: Reader, path: Path) -> Sweep:
    top.only(TOP_KEYS)
    sw = top.table("sweep", required=True)
    sw.only(SWEEP_KEYS)
    server = _server_table(top.table("server"), "server")
    env = top.table("env").str_map()
    clusters = _clusters(top)
    workload = _workload(top.table("workload", required=True))
    ep_cap = sw.integer("ep_cap", default=0, minimum=1)
    configs = _configs(top, ep_cap)
    baseline_sel = sw.text("baseline", default=configs[0].id)
    base = [c for c in configs if c.matches(baseline_sel)]
    if len(base) != 1:
        raise MatrixError(
            f"{path}: key 'sweep.baseline': expected the id of one configuration in the sweep "
            f"({', '.join(c.id for c in configs)}), found {baseline_sel!r}"
        )
    default_cluster = sw.text("cluster", default=next(iter(clusters)))
    if default_cluster not in clusters:
        raise MatrixError(
            f"{path}: key 'sweep.cluster': expected one of {', '.join(clusters)}, "
            f"found {default_cluster!r}"
        )
    return Sweep(
        path=path,
        name=sw.text("name", default=path.stem),
        image=sw.text("image", default=""),
        model_path=sw.text("model_path", required=True),
        baseline=base[0].id,
        default_cluster=default_cluster,
        devices=tuple(sw.str_list("devices", default=[])),
        server=server,
        env=env,
        configs=configs,
        workload=workload,
        clusters=clusters,
        boot_timeout_s=sw.number("boot_timeout_s", default=1800.0, minimum=0.001),
        spread_threshold=sw.number("spread_threshold", default=0.02, minimum=0.0),
        min_repeats=sw.integer("min_repeats", default=workload.repeats, minimum=1),
        spread_rule=sw.choice("spread_rule", SPREAD_RULES, default="fail"),
        fatal_patterns=tuple(sw.str_list("fatal_patterns", default=[])),
        thresholds=tuple(sw.str_list("thresholds", default=[])),
    )


def _server_table(tab: Reader, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tab.items():
        if key in PLUGIN_OWNED_FLAGS:
            raise MatrixError(
                f"{tab.path}: key '{where}.{key}': set by the plugin from the layout and the "
                f"cluster; remove it (found {value!r})"
            )
        if not isinstance(value, (str, int, float, bool)):
            raise MatrixError(
                f"{tab.path}: key '{where}.{key}': expected a string, number or boolean, "
                f"found {type(value).__name__} {value!r}"
            )
        out[key] = value
    return out


def _configs(top: Reader, ep_cap: int) -> tuple[Config, ...]:
    items = top.table_list("configs")
    if not items:
        raise MatrixError(
            f"{top.path}: key 'configs': expected at least one [[configs]], found none"
        )
    configs: list[Config] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        item.only(CONFIG_KEYS)
        pp = item.integer("pp", required=True, minimum=1)
        tp = item.integer("tp", required=True, minimum=1)
        ep = item.integer("ep", default=min(ep_cap, tp) if ep_cap else 1, minimum=1)
        if ep > tp:
            raise MatrixError(
                f"{top.path}: key '{item.where}.ep': expected EP ≤ TP (EP splits the TP group), "
                f"found EP {ep} > TP {tp}"
            )
        if tp % ep:
            raise MatrixError(
                f"{top.path}: key '{item.where}.ep': expected TP % EP == 0, found TP {tp} % EP "
                f"{ep} = {tp % ep}"
            )
        cfg = Config(
            pp=pp,
            tp=tp,
            ep=ep,
            server=_server_table(item.table("server"), f"{item.where}.server"),
            env=item.table("env").str_map(),
            order=i,
        )
        if cfg.id in seen:
            raise MatrixError(
                f"{top.path}: key '{item.where}': duplicate configuration {cfg.id} "
                f"(already configs[{seen[cfg.id]}])"
            )
        seen[cfg.id] = i
        configs.append(cfg)
    return tuple(configs)


def _workload(w: Reader) -> Workload:
    w.only(WORKLOAD_KEYS)
    dataset = w.text("dataset", default="random-ids")
    if dataset != "random-ids":
        raise MatrixError(
            f"{w.path}: key 'workload.dataset': expected 'random-ids', found {dataset!r}"
        )
    api = w.text("api", default="generate")
    if api not in ("generate", "completions"):
        raise MatrixError(
            f"{w.path}: key 'workload.api': expected 'generate' or 'completions', found {api!r}"
        )
    conc = w.int_list("concurrency", required=True, minimum=1)
    if len(set(conc)) != len(conc):
        raise MatrixError(f"{w.path}: key 'workload.concurrency': duplicate values in {conc}")
    ratio = w.number("range_ratio", default=1.0, minimum=0.0)
    if ratio > 1.0:
        raise MatrixError(
            f"{w.path}: key 'workload.range_ratio': expected 0 ≤ ratio ≤ 1, found {ratio}"
        )
    return Workload(
        dataset=dataset,
        input_len=w.integer("input_len", required=True, minimum=1),
        output_len=w.integer("output_len", required=True, minimum=1),
        range_ratio=ratio,
        concurrency=tuple(conc),
        num_requests=w.integer("num_requests", required=True, minimum=1),
        repeats=w.integer("repeats", default=3, minimum=1),
        seed=w.integer("seed", default=1, minimum=0),
        vocab_size=w.integer("vocab_size", default=32000, minimum=2),
        warmup_requests=w.integer("warmup_requests", default=1, minimum=0),
        api=api,
        request_timeout_s=w.number("request_timeout_s", default=3600.0, minimum=0.001),
        round_timeout_s=w.number("round_timeout_s", default=7200.0, minimum=0.001),
    )


def _clusters(top: Reader) -> dict[str, Cluster]:
    tab = top.table("clusters", required=True)
    out: dict[str, Cluster] = {}
    for name in tab.keys():  # noqa: SIM118 (Reader is not a dict)
        c = tab.table(name, required=True)
        c.only(CLUSTER_KEYS)
        kind = c.choice("kind", ("local", "ssh"), required=True)
        launcher = c.choice("launcher", ("process", "docker"), default="process")
        if kind == "local" and launcher != "process":
            raise MatrixError(
                f"{c.path}: key '{c.where}.launcher': a local cluster starts processes; "
                f"expected 'process', found {launcher!r}"
            )
        hosts = _hosts(c)
        out[name] = Cluster(
            name=name,
            kind=kind,
            launcher=launcher,
            hosts=hosts,
            gpus_per_node=c.integer("gpus_per_node", required=True, minimum=1),
            server_module=c.text("server_module", default="sglang.launch_server"),
            port=c.integer("port", default=30000, minimum=1, maximum=65535),
            dist_init_port=c.integer("dist_init_port", default=20000, minimum=1, maximum=65535),
            nvidia_smi=tuple(c.str_list("nvidia_smi", default=["nvidia-smi"])),
            env=c.table("env").str_map(),
            python=c.text("python", default=""),
            ssh_user=c.text("ssh_user", default="root"),
            ssh_key=c.text("ssh_key", default=""),
            known_hosts=c.text("known_hosts", default=""),
            verify_host_keys=c.flag("verify_host_keys", default=True),
            sudo_password_file=c.text("sudo_password_file", default=""),
            shm_size=c.text("shm_size", default="32g"),
            mounts=tuple(c.str_list("mounts", default=[])),
        )
    if not out:
        raise MatrixError(f"{top.path}: key 'clusters': expected at least one cluster, found none")
    return out


def _hosts(c: Reader) -> tuple[Host, ...]:
    raw = c.raw("hosts", required=True)
    if not isinstance(raw, list) or not raw:
        raise MatrixError(
            f"{c.path}: key '{c.where}.hosts': expected a non-empty list of addresses or "
            f"{{name, address}} tables, found {raw!r}"
        )
    hosts: list[Host] = []
    for i, h in enumerate(raw):
        if isinstance(h, str) and h:
            hosts.append(Host(address=h, name=h))
        elif isinstance(h, dict):
            r = Reader(c.path, h, f"{c.where}.hosts[{i}]")
            r.only(HOST_KEYS)
            addr = r.text("address", required=True)
            hosts.append(Host(address=addr, name=r.text("name", default=addr)))
        else:
            raise MatrixError(
                f"{c.path}: key '{c.where}.hosts[{i}]': expected an address string or a "
                f"{{name, address}} table, found {h!r}"
            )
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise MatrixError(f"{c.path}: key '{c.where}.hosts': duplicate hosts in {names}")
    return tuple(hosts)


def _check_against_pool(sweep: Sweep, pool: tuple[Cluster, ...]) -> None:
    for cfg in sweep.configs:
        world = cfg.gpus
        if not any(c.fits(cfg) for c in pool):
            sizes = " or ".join(
                f"{c.gpus} ({len(c.hosts)} nodes × {c.gpus_per_node} GPUs of cluster {c.name!r})"
                for c in pool
            )
            raise MatrixError(
                f"{sweep.path}: key 'configs[{cfg.order}]' ({cfg.id}): expected PP × TP = "
                f"{sizes}, found {cfg.pp} × {cfg.tp} = {world}"
            )
    w = sweep.workload
    if not math.isfinite(w.request_timeout_s):
        raise MatrixError(f"{sweep.path}: key 'workload.request_timeout_s': must be finite")
