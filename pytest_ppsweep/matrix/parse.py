"""Parse and validate a sweep file (``test_matrix/ppsweep.toml``) into the frozen model.

Everything a user can get wrong in the file is caught here, before anything is launched, and
reported as a :class:`~pytest_ppsweep.matrix.schema.MatrixError` that names the file, the key,
what was expected and what was found. The plugin turns it into ``pytest.UsageError``.
"""

from __future__ import annotations

import math
import re
import string
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import DEFAULT_ENGINE, ENGINES, engine_of
from pytest_ppsweep.matrix import axes as axes_mod
from pytest_ppsweep.matrix.accuracyspec import read_accuracy
from pytest_ppsweep.matrix.commspec import read_comm
from pytest_ppsweep.matrix.correctnessspec import read_correctness
from pytest_ppsweep.matrix.deployment import PD_ROLES, Deployment, Router, ServerGroup
from pytest_ppsweep.matrix.expectspec import read_expectations
from pytest_ppsweep.matrix.kinds import (
    CLUSTER_KEYS,
    CLUSTER_KINDS,
    LAUNCHERS,
    NEEDS_IMAGE,
    owner_of,
)
from pytest_ppsweep.matrix.model import (
    HEALTH_STALL_S,
    Cluster,
    Config,
    Host,
    ProfileSpec,
    Sweep,
    Workload,
    file_of,
    select,
    unknown_selector,
)
from pytest_ppsweep.matrix.schema import (
    COMPARE_KEYS,
    CONFIG_KEYS,
    HOST_KEYS,
    HOSTNAME,
    INT_LIMIT,
    OBJECTIVE_METRICS,
    PROFILE_ACTIVITIES,
    PROFILE_KEYS,
    ROLE_KEYS,
    ROUTER_KEYS,
    ROUTER_PORT,
    SPREAD_RULES,
    SWEEP_KEYS,
    TOP_KEYS,
    USER_NAME,
    WORKLOAD_KEYS,
    WORKLOAD_TYPE_KEYS,
    WORKLOAD_TYPES,
    MatrixError,
    Reader,
    did_you_mean,
    matching,
    shown_value,
)
from pytest_ppsweep.matrix.slospec import SloSpec, read_rate, read_slo
from pytest_ppsweep.matrix.tracefile import TraceError, file_sha256, read_requests


def load(path: Path, cluster: str | None = None, image: str | None = None) -> Sweep:
    """Read and validate ``path`` (with the shared files its ``extends`` names).

    ``cluster`` names the cluster, or a comma-separated pool of clusters, the run uses (default:
    ``[sweep] cluster``); every layout must fit at least one of them. An error about a key that
    a shared file holds names that file.
    """
    raw, origins = _read_extended(path)
    try:
        sweep = _build(Reader(path, raw, ""), path)
        sweep = replace(sweep, origins=origins)
        if image:
            sweep = _replace_image(sweep, image)
        _check_against_pool(sweep, sweep.pool(cluster))
    except MatrixError as exc:
        raise _in_its_file(exc, path, origins) from None
    return sweep


# A sweep file's ``extends = "my-cluster.toml"`` (or a list of files): the tables a shared file
# may hold. Precedence: the sweep file's own keys win over every shared file's, a later shared
# file's over an earlier one's; tables merge key by key, a value (an array too) is replaced.
SHARED_KEYS = ("clusters", "server", "env", "workload", "workloads")
_KEY_IN_MESSAGE = re.compile(r"key '([^']+)'")


def _dotted(data: Any, prefix: str) -> list[str]:
    """Every dotted key of ``data`` under ``prefix`` (tables, values, array elements)."""
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            out += _dotted(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            if isinstance(value, dict):
                out += _dotted(value, f"{prefix}[{i}]")
    return out


def _merged(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in own.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _read_extended(path: Path) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
    """The sweep file's TOML merged over its shared files', and where each key came from
    (empty without ``extends``)."""
    own = _read(path)
    if "extends" not in own:
        return own, ()
    names = own.pop("extends")
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names or not all(
            isinstance(n, str) and n for n in names):
        raise MatrixError(f"{path}: key 'extends': expected the path of a TOML file, or a list "
                          f"of them (relative to {path.parent}), found {shown_value(names)}")
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name in names:
        shared = (path.parent / Path(name).expanduser()).resolve()
        if not shared.is_file():
            raise MatrixError(f"{path}: key 'extends': expected a shared TOML file, found "
                              f"{name!r} (no file {shared})")
        data = _read(shared)
        for key in data:
            if key not in SHARED_KEYS:
                hint = " (a shared file names no other file)" if key == "extends" else ""
                raise MatrixError(
                    f"{shared}: key '{key}': expected only the tables a sweep file can share "
                    f"({', '.join(SHARED_KEYS)}){hint}, found {key!r}")
        merged = _merged(merged, data)
        origins.update(dict.fromkeys(_dotted(data, ""), str(shared)))
    origins.update(dict.fromkeys(_dotted(own, ""), str(path)))
    return _merged(merged, own), tuple(origins.items())


def _in_its_file(exc: MatrixError, path: Path, origins: tuple[tuple[str, str], ...]
                 ) -> MatrixError:
    """``exc`` naming the shared file that holds the key it is about, when one does."""
    text = str(exc)
    head = f"{path}: "
    found = _KEY_IN_MESSAGE.search(text)
    if not origins or not text.startswith(head) or found is None:
        return exc
    where = file_of(origins, found.group(1), path)
    return exc if where == path else MatrixError(f"{where}: {text[len(head):]}")


def _read(path: Path) -> dict[str, Any]:
    """The file's TOML; every way it can fail to be read is a MatrixError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        siblings = sorted(p.name for p in path.parent.glob("*.toml")) \
            if path.parent.is_dir() else []
        raise MatrixError(f"{path}: sweep file not found{did_you_mean(path.name, siblings)}"
                          ) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise MatrixError(
            f"{path}: not valid TOML: expected UTF-8 text, found byte "
            f"0x{exc.object[exc.start]:02x} (at line {line})"
        ) from None
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read the sweep file: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        dup = _duplicate_key(text)
        if dup is not None:
            raise MatrixError(f"{path}: not valid TOML: {dup}") from None
        msg = str(exc)
        if "line" not in msg:  # "(at end of document)"
            msg += f" (line {text.count(chr(10)) + 1}, the last)"
        raise MatrixError(f"{path}: not valid TOML: {msg}") from None
    except RecursionError:
        lines = text.splitlines() or [""]
        deepest = max(range(len(lines)), key=lambda i: lines[i].count("[") + lines[i].count("{"))
        raise MatrixError(
            f"{path}: not valid TOML: values nested too deeply (arrays or inline tables, at line "
            f"{deepest + 1})"
        ) from None
    except ValueError:  # an integer of more than 4,300 decimal digits
        long = re.search(r"\d{4300,}", text)
        at = str(text.count("\n", 0, long.start()) + 1) if long else "?"
        raise MatrixError(
            f"{path}: not valid TOML: expected an integer of at most 64 bits, found one of more "
            f"than 4,300 digits (at line {at})"
        ) from None


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]*?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_.-]+)\s*=')


def _duplicate_key(text: str) -> str | None:
    """The first key given twice in one table, by line (tomllib says only "Cannot overwrite a
    value"); None when no duplicate is found this way (multi-line strings are not parsed)."""
    seen: dict[tuple[str, str], int] = {}
    headers: dict[str, int] = {}
    table = ""
    for no, line in enumerate(text.splitlines(), 1):
        head = _HEADER.match(line)
        if head:
            table = ".".join(part.strip().strip("\"'") for part in head.group(1).split("."))
            array = line.lstrip().startswith("[[")
            if not array and table in headers:
                return f"table [{table}] is declared twice (lines {headers[table]} and {no})"
            headers.setdefault(table, no)
            if array:  # a new element: its keys start afresh
                seen = {k: v for k, v in seen.items() if not k[0].startswith(table)}
            continue
        m = _ASSIGN.match(line)
        if m:
            name = m.group(1).strip("\"'")
            where = f"{table}.{name}" if table else name
            if (table, name) in seen:
                return (f"key '{where}' is given twice (lines {seen[(table, name)]} and {no}); "
                        f"expected each key once")
            seen[(table, name)] = no
    return None


def _replace_image(sweep: Sweep, image: str) -> Sweep:
    if not _IMAGE.fullmatch(image):
        raise MatrixError(
            f"{sweep.path}: --ppsweep-image (key 'sweep.image'): expected an image reference "
            f"(no spaces, quotes or shell characters), found {shown_value(image)}"
        )
    return replace(sweep, image=image)


def _build(top: Reader, path: Path) -> Sweep:
    top.only(TOP_KEYS)
    sw = top.table("sweep", required=True)
    sw.only(SWEEP_KEYS)
    engine = _engine(sw)
    server = _server_table(top.table("server"), "server", engine)
    env = _env(top.table("env"))
    clusters = _clusters(top, engine)
    workloads = _workloads(top)
    workload = next(iter(workloads.values()))
    ep_cap = sw.integer("ep_cap", default=0, minimum=1)
    configs, axis_names = _points(top, sw, ep_cap, server, env, list(workloads), engine)
    baseline_sel = sw.text("baseline", default=configs[0].id)
    base = _baseline_points(configs, baseline_sel)
    if len(base) != 1:
        raise MatrixError(
            f"{path}: key 'sweep.baseline': expected the id of one configuration in the sweep "
            f"({', '.join(c.id for c in configs)}), found {baseline_sel!r}"
            f"{unknown_selector(configs, baseline_sel) if not base else ''}"
        )
    default_cluster = sw.text("cluster", default=next(iter(clusters)))
    if default_cluster not in clusters:
        raise MatrixError(
            f"{path}: key 'sweep.cluster': expected one of {', '.join(clusters)}, "
            f"found {default_cluster!r}{did_you_mean(default_cluster, list(clusters))}"
        )
    return Sweep(
        path=path,
        name=sw.text("name", default=path.stem),
        image=_image(sw),
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
        health_stall_s=sw.number("health_stall_s", default=HEALTH_STALL_S, minimum=0.1),
        spread_threshold=sw.number("spread_threshold", default=0.02, minimum=0.0),
        min_repeats=sw.integer("min_repeats", default=workload.repeats, minimum=1),
        spread_rule=sw.choice("spread_rule", SPREAD_RULES, default="fail"),
        max_repeats=_max_repeats(sw, workload.repeats),
        boots=sw.integer("boots", default=1, minimum=1),
        fatal_patterns=_patterns(sw),
        thresholds=tuple(sw.str_list("thresholds", default=[])),
        profile=_profile(top, configs, workload) if "profile" in top.data else None,
        workloads=workloads if len(workloads) > 1 else {},
        compare_baseline=_compare(top, axis_names, configs),
        compare_alpha=_alpha(top),
        compare_min_effect_pct=_min_effect(top),
        compare_boot_noise_pct=_boot_noise(top),
        compare_one_boot_bound_pct=_one_boot_bound(top),
        compare_sequential=top.table("compare").flag("sequential", default=False),
        axis_names=axis_names,
        comm=read_comm(top),
        correctness=read_correctness(top),
        accuracy=read_accuracy(top),
        expect=read_expectations(top, axis_names),
        gpu_hour_usd=_price(sw),
        engine=engine.name,
    )


def _engine(sw: Reader) -> Engine:
    """``[sweep] engine``: the serving engine (default: the registry's default)."""
    name = sw.text("engine", default=DEFAULT_ENGINE)
    if name not in ENGINES:
        raise MatrixError(
            f"{sw.path}: key 'sweep.engine': expected one of {', '.join(sorted(ENGINES))}, "
            f"found {shown_value(name)}{did_you_mean(name, list(ENGINES))}"
        )
    return engine_of(name)


def _price(sw: Reader) -> float | None:
    if "gpu_hour_usd" not in sw.data:
        return None
    value = sw.number("gpu_hour_usd", minimum=0.0)
    if not value > 0:
        raise MatrixError(f"{sw.path}: key 'sweep.gpu_hour_usd': expected a price > 0 "
                          f"(dollars per GPU-hour), found {value!r}")
    return value


def _max_repeats(sw: Reader, repeats: int) -> int:
    """``[sweep] max_repeats``: rounds of a point in all, extra rounds included (default 8, and
    never fewer than the planned repeats)."""
    default = max(8, repeats)
    value = sw.integer("max_repeats", default=default, minimum=1)
    if value < repeats:
        raise MatrixError(f"{sw.path}: key 'sweep.max_repeats': expected at least the workload's "
                          f"repeats ({repeats}), found {value}")
    return value


def _points(top: Reader, sw: Reader, ep_cap: int, server: dict[str, Any], env: dict[str, str],
            workloads: list[str], engine: Engine) -> tuple[tuple[Config, ...], tuple[str, ...]]:
    """The sweep's points: the ``[[configs]]`` layouts as today when there are no axes, no
    rules and one workload (ids unchanged), else :func:`axes.expand`."""
    extended = any(k in top.data for k in ("axes", "exclude", "include")) or len(workloads) > 1
    max_points = sw.integer("max_points", default=axes_mod.DEFAULT_MAX_POINTS, minimum=1)
    backends = sw.str_list("a2a_ep_backends", default=list(engine.ep_spanning_a2a))
    configs = tuple(replace(c, engine=engine.name)
                    for c in _configs(top, ep_cap, engine, required=not extended))
    if not extended:
        return _pd_rewrite_ep(axes_mod.rewrite_ep(configs, server, backends, engine), server,
                              backends, engine), ()
    pd = next((c for c in configs if c.deployed is not None), None)
    layout_axes = [a for a in top.table("axes").data if a in axes_mod.LAYOUT_AXES]
    if pd is not None and layout_axes:
        raise MatrixError(
            f"{top.path}: key 'axes.{layout_axes[0]}': expected no layout axis (pp, tp, ep) in a "
            f"sweep with P/D layouts (configs[{pd.order}], {pd.id}: each role table gives its "
            f"own sizes), found axis {layout_axes[0]}")
    points, names = axes_mod.expand(top, configs, server, env, workloads, ep_cap, backends,
                                    max_points, engine)
    return _pd_rewrite_ep(points, server, backends, engine), names


def _pd_rewrite_ep(configs: tuple[Config, ...], server: dict[str, Any], backends: list[str],
                   engine: Engine) -> tuple[Config, ...]:
    """Each P/D layout's groups with the EP that runs (the engine's rewrite, per group: its
    own flags count), its config's pp/tp/ep and asked EP its lead group's."""
    out = []
    for cfg in configs:
        dep = cfg.deployed
        if dep is None:
            out.append(cfg)
            continue
        groups = tuple(replace(g, ep=engine.effective_ep(g.tp, g.ep, {**server, **cfg.server,
                                                                      **g.flags}, backends))
                       for g in dep.groups)
        lead, asked = groups[0], dep.lead.ep
        out.append(replace(cfg, pp=lead.pp, tp=lead.tp, ep=lead.ep,
                           asked_ep=asked if asked != lead.ep else 0,
                           deployed=replace(dep, groups=groups)))
    return tuple(out)


def _baseline_points(configs: tuple[Config, ...], selector: str) -> list[Config]:
    """The configurations ``[sweep] baseline`` names: the exact id, else among those of the
    layout it names the first workload's point with every axis at its default."""
    exact = [c for c in configs if c.id == selector]
    if exact:
        return exact
    chosen = [c for c in configs if c.matches(selector)]
    if len(chosen) > 1:
        first = chosen[0].workload
        chosen = [c for c in chosen if not c.tags and c.workload == first] or chosen
    return chosen


def _workloads(top: Reader) -> dict[str, Workload]:
    """``[workload]`` alone (one workload, named ``default``), or ``[workloads.<name>]``
    tables, each over the common keys of ``[workload]``."""
    names = axes_mod.workload_names(top)
    if not names:
        return {"default": _workload(top.table("workload", required=True))}
    common = top.table("workload")
    out: dict[str, Workload] = {}
    for name in names:
        own = top.table("workloads").table(name, required=True)
        out[name] = _workload(Reader(top.path, {**common.data, **own.data}, f"workloads.{name}"),
                              own=frozenset(own.data))
    return out


def _compare(top: Reader, axis_names: tuple[str, ...],
             configs: tuple[Config, ...]) -> dict[str, Any]:
    tab = top.table("compare")
    tab.only(COMPARE_KEYS)
    base = tab.table("baseline")
    for key in base.keys():  # noqa: SIM118 (Reader is not a dict)
        if key not in axis_names:
            raise MatrixError(
                f"{top.path}: key 'compare.baseline.{key}': expected one of the sweep's axes "
                f"({', '.join(axis_names) or 'none'}), found {key!r}"
                f"{did_you_mean(key, axis_names)}")
        values = list(dict.fromkeys(str(c.axes[key]) for c in configs if key in c.axes))
        value = base.data[key]
        if values and str(value) not in values:
            raise MatrixError(
                f"{top.path}: key 'compare.baseline.{key}': expected one of the values of axis "
                f"{key} ({', '.join(values)}), found {shown_value(value)}"
                f"{did_you_mean(str(value), values)}")
    return dict(base.data)


def _alpha(top: Reader) -> float:
    """``[compare] alpha``: the decisions' significance level, family-wise over a question
    (stats/decision.py; default 0.05)."""
    tab = top.table("compare")
    value = tab.number("alpha", default=0.05)
    if not 0.0 < value <= 0.5:
        raise MatrixError(f"{top.path}: key 'compare.alpha': expected a significance level in "
                          f"(0, 0.5], e.g. 0.05, found {value!r}")
    return value


def _compare_pct(top: Reader, key: str, default: float, what: str, example: str,
                 zero_ok: bool = False) -> float:
    """A ``[compare]`` key that is a percentage in (0, 100) ([0, 100) with ``zero_ok``)."""
    value = top.table("compare").number(key, default=default)
    low_ok = value >= 0.0 if zero_ok else value > 0.0
    if not low_ok or not value < 100.0:
        span = "[0, 100)" if zero_ok else "(0, 100)"
        raise MatrixError(f"{top.path}: key 'compare.{key}': expected {what} in % in {span}, "
                          f"e.g. {example}, found {value!r}")
    return value


def _min_effect(top: Reader) -> float:
    """``[compare] min_effect_pct``: the equivalence margin in % (stats/decision.py; default
    1)."""
    return _compare_pct(top, "min_effect_pct", 1.0, "a margin", "1")


def _boot_noise(top: Reader) -> float | None:
    """``[compare] boot_noise_pct``: a stated σ, in %, of one boot's offset (stats/decision.py:
    the source of the boot-to-boot variance when the run measured none); None when not set."""
    if "boot_noise_pct" not in top.table("compare").data:
        return None
    return _compare_pct(top, "boot_noise_pct", 0.0, "the σ of one boot's offset", "1.5",
                        zero_ok=True)


def _one_boot_bound(top: Reader) -> float:
    """``[compare] one_boot_bound_pct``: how far an interval must clear 0 for a decision
    measured within one boot per layout to be plain decided (stats/decision.py; default 5)."""
    return _compare_pct(top, "one_boot_bound_pct", 5.0, "a bound", "5")


def _server_table(tab: Reader, where: str, engine: Engine) -> dict[str, Any]:
    """A ``[server]`` table: flag names and values, none of them a flag the sweep's engine
    takes from the layout and the cluster (another engine's own flags are not refused here:
    the engine's parser judges them)."""
    out: dict[str, Any] = {}
    for key, value in tab.items():
        if key in engine.owned_flags:
            raise MatrixError(
                f"{tab.path}: key '{where}.{key}': set by the plugin from the layout and the "
                f"cluster; remove it (found {shown_value(value)})"
            )
        if not _FLAG.fullmatch(key):
            raise MatrixError(
                f"{tab.path}: key '{where}.{key}': expected a flag name (letters, digits, '_' "
                f"and '-', as in chunked_prefill_size), found {shown_value(key)}"
            )
        if not isinstance(value, (str, int, float, bool)) or not _plain(value):
            raise MatrixError(
                f"{tab.path}: key '{where}.{key}': expected a string (no NUL), a 64-bit "
                f"integer, a finite number or a boolean, found {type(value).__name__} "
                f"{shown_value(value)}"
            )
        out[key] = value
    return out


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*")
_FLAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def _plain(value: str | int | float | bool) -> bool:
    """A value a flag can carry as one argument."""
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -INT_LIMIT <= value < INT_LIMIT
    return math.isfinite(value)


def _configs(top: Reader, ep_cap: int, engine: Engine, required: bool = True
             ) -> tuple[Config, ...]:
    items = top.table_list("configs")
    if not items and not required:
        return ()
    if not items:
        raise MatrixError(
            f"{top.path}: key 'configs': expected at least one [[configs]], found none"
        )
    configs: list[Config] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        item.only(CONFIG_KEYS)
        if any(k in item.data for k in (*PD_ROLES, "router")):
            cfg = _pd_config(top, item, i, ep_cap, engine)
        else:
            pp = item.integer("pp", required=True, minimum=1)
            tp = item.integer("tp", required=True, minimum=1)
            cfg = Config(
                pp=pp,
                tp=tp,
                ep=_ep(item, ep_cap, tp),
                server=_server_table(item.table("server"), f"{item.where}.server", engine),
                env=_env(item.table("env")),
                order=i,
            )
        if cfg.id in seen:
            first = configs[seen[cfg.id]]
            named = axes_mod.distinguish(first, cfg)
            if named is None:
                raise MatrixError(
                    f"{top.path}: key '{item.where}': duplicate configuration {cfg.id} "
                    f"(already configs[{seen[cfg.id]}])"
                )
            at = seen.pop(cfg.id)
            configs[at], cfg = named
            seen[configs[at].id] = at
            if cfg.id in seen:
                raise MatrixError(
                    f"{top.path}: key '{item.where}': duplicate configuration {cfg.id} "
                    f"(already configs[{seen[cfg.id]}])"
                )
        seen[cfg.id] = i
        configs.append(cfg)
    return tuple(configs)


def _ep(t: Reader, ep_cap: int, tp: int) -> int:
    """The ``ep`` of a layout table (a ``[[configs]]`` entry or a P/D role table): as given,
    else min(ep_cap, TP), else 1; EP splits the TP group."""
    ep = t.integer("ep", default=min(ep_cap, tp) if ep_cap else 1, minimum=1)
    if ep > tp:
        raise MatrixError(
            f"{t.path}: key '{t.where}.ep': expected EP ≤ TP (EP splits the TP group), "
            f"found EP {ep} > TP {tp}"
        )
    if tp % ep:
        raise MatrixError(
            f"{t.path}: key '{t.where}.ep': expected TP % EP == 0, found TP {tp} % EP "
            f"{ep} = {tp % ep}"
        )
    return ep


def _pd_config(top: Reader, item: Reader, order: int, ep_cap: int, engine: Engine) -> Config:
    """A ``[[configs]]`` entry of ``prefill`` and ``decode`` tables: a P/D layout. Each role's
    ``servers`` servers of its shape are groups ``prefill0``, ``prefill1``, …, ``decode0``, …
    (in that start order) on nodes of their own; its config's ``server`` and ``env`` reach
    every group, a role's ``server`` only its own servers. The router: ``[configs.router]``
    over ``[router]``, key by key."""
    where = item.where
    missing = [r for r in PD_ROLES if r not in item.data]
    if missing:
        given = [r for r in PD_ROLES if r in item.data]
        found = f"only [{where}.{given[0]}]" if given else f"only [{where}.router]"
        raise MatrixError(
            f"{top.path}: key '{where}.{missing[0]}': a P/D layout has both prefill and decode "
            f"servers; expected a [{where}.{missing[0]}] table, found {found}")
    beside = [k for k in ("pp", "tp", "ep") if k in item.data]
    if beside:
        raise MatrixError(
            f"{top.path}: key '{where}.{beside[0]}': expected no {beside[0]} beside the prefill "
            f"and decode tables (each role gives its own pp, tp, ep), found "
            f"{shown_value(item.data[beside[0]])}")
    if not engine.router_module:
        raise MatrixError(
            f"{top.path}: key '{where}': P/D layouts (prefill and decode servers) are not "
            f"supported for {engine.name} yet; expected a layout of pp and tp with "
            f"[sweep] engine = {engine.name!r}, found prefill and decode tables")
    groups: list[ServerGroup] = []
    for role in PD_ROLES:
        r = item.table(role, required=True)
        r.only(ROLE_KEYS)
        tp = r.integer("tp", required=True, minimum=1)
        pp = r.integer("pp", default=1, minimum=1)
        ep = _ep(r, ep_cap, tp)
        dp = r.integer("dp", default=1, minimum=1)
        servers = r.integer("servers", default=1, minimum=1)
        nodes = r.integer("nodes", default=0, minimum=1) or None
        flags = _server_table(r.table("server"), f"{r.where}.server", engine)
        axes = top.table("axes").data
        clash = next((k for k in flags if k in axes), None)
        if clash is not None:  # the axis's value would not reach this role's servers
            raise MatrixError(
                f"{top.path}: key '{r.where}.server.{clash}': expected a flag that is not also "
                f"an axis (axes.{clash}), found {shown_value(flags[clash])}")
        groups += [ServerGroup(role, pp, tp, ep, dp, engine=engine.name, nodes=nodes,
                               flags=flags, label=f"{role}{k}") for k in range(servers)]
    sw = top.table("sweep")
    deployed = Deployment(
        tuple(groups), router=_router(top, item, engine),
        transfer_backend=sw.choice("transfer_backend", engine.transfer_backends,
                                   default=engine.transfer_backends[0]))
    lead = deployed.lead
    return Config(pp=lead.pp, tp=lead.tp, ep=lead.ep,
                  server=_server_table(item.table("server"), f"{where}.server", engine),
                  env=_env(item.table("env")), order=order, engine=engine.name,
                  deployed=deployed)


def _router(top: Reader, item: Reader, engine: Engine) -> Router:
    """A P/D layout's router: each key from ``[configs.router]``, else ``[router]``, else its
    default (port 30080, node 0: the cluster's first node, the engine's default policy)."""
    tables = [item.table("router"), top.table("router")]
    for t in tables:
        t.only(ROUTER_KEYS)

    def holder(key: str) -> Reader:
        return next((t for t in tables if key in t.data), tables[0])

    return Router(
        port=holder("port").integer("port", default=ROUTER_PORT, minimum=1, maximum=65535),
        node=holder("node").integer("node", default=0, minimum=0),
        engine=engine.name,
        policy=holder("policy").choice("policy", engine.router_policies,
                                       default=engine.router_policies[0]),
    )


def _workload(w: Reader, own: frozenset[str] | None = None) -> Workload:
    """One workload table. ``own``: the keys of a named workload's own table (a key of the
    common ``[workload]`` that its type does not take is left out; its own table's is an
    error); None: every key is its own."""
    w.only(WORKLOAD_KEYS)
    kind = w.choice("type", WORKLOAD_TYPES, default="random-ids")
    foreign = {k for keys in WORKLOAD_TYPE_KEYS.values() for k in keys} - set(
        WORKLOAD_TYPE_KEYS[kind])
    for key in list(w.data):
        if key in foreign and (own is None or key in own):
            raise MatrixError(
                f"{w.path}: key '{w.where}.{key}': expected no {key} on a workload of type "
                f"{kind!r} (it takes {', '.join(WORKLOAD_TYPE_KEYS[kind])}), found "
                f"{shown_value(w.data[key])}")
    w = Reader(w.path, {k: v for k, v in w.data.items() if k not in foreign}, w.where)
    if kind != "random-ids" and "slo" in w.data:
        raise MatrixError(f"{w.path}: key '{w.where}.slo': expected no [slo] on a workload of "
                          f"type {kind!r} (the SLO search probes random-ids loads), found a "
                          f"table")
    if kind == "trace":
        w = _trace_facts(w)
    dataset = w.text("dataset", default="random-ids")
    if dataset != "random-ids":
        raise MatrixError(
            f"{w.path}: key '{w.where}.dataset': expected 'random-ids', found {dataset!r}"
        )
    api = w.text("api", default="generate")
    if api not in ("generate", "completions"):
        raise MatrixError(
            f"{w.path}: key 'workload.api': expected 'generate' or 'completions', found {api!r}"
        )
    rate = read_rate(w, "request_rate")
    num_requests = w.integer("num_requests", required=True, minimum=1)
    if "concurrency" not in w.data and (math.isfinite(rate) or kind == "trace"):
        # open loop without a cap (a trace replays on its own timestamps: open loop too)
        w = Reader(w.path, {**w.data, "concurrency": [num_requests]}, w.where)
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
        num_requests=num_requests,
        repeats=w.integer("repeats", default=3, minimum=1),
        seed=w.integer("seed", default=1, minimum=0),
        vocab_size=w.integer("vocab_size", default=32000, minimum=2),
        warmup_requests=w.integer("warmup_requests", default=1, minimum=0),
        api=api,
        request_timeout_s=w.number("request_timeout_s", default=3600.0, minimum=0.001),
        round_timeout_s=w.number("round_timeout_s", default=7200.0, minimum=0.001),
        request_rate=rate,
        burstiness=_burstiness(w),
        slo=_slo(w, num_requests),
        objective=_objective(w),
        **_shared_fields(w, kind),
    )


def _trace_facts(w: Reader) -> Reader:
    """A trace workload's table with the trace's own facts filled in: ``path`` resolved from the
    sweep file's folder and checked line by line (matrix/tracefile.py), num_requests (the
    trace's, or its first N when given), input_len / output_len (the trace's mean lengths:
    what the report and the objective's shape read)."""
    given = w.text("path", required=True)
    if "time_scale" in w.data and "request_rate" in w.data:
        raise MatrixError(f"{w.path}: key '{w.where}.request_rate': expected either time_scale "
                          f"(the trace's own timestamps, stretched) or request_rate, found both")
    file = (w.path.parent / given).resolve()
    try:
        requests = read_requests(file)
    except TraceError as exc:
        raise MatrixError(f"{w.path}: key '{w.where}.path': expected a Mooncake-format trace "
                          f"(JSONL of timestamp, input_length, output_length, hash_ids), "
                          f"found: {exc}") from None
    n = w.integer("num_requests", default=len(requests), minimum=1)
    if n > len(requests):
        raise MatrixError(f"{w.path}: key '{w.where}.num_requests': expected at most the "
                          f"trace's {len(requests)} requests, found {n}")
    used = requests[:n]
    return Reader(w.path, {**w.data, "num_requests": n, "trace_file": str(file),
                           "trace_sha256": file_sha256(file),
                           "input_len": max(1, round(sum(r.input_length for r in used) / n)),
                           "output_len": max(1, round(sum(r.output_length for r in used) / n))},
                  w.where)


def _shared_fields(w: Reader, kind: str) -> dict[str, Any]:
    """The Workload fields of a trace or shared-prefix workload (none of a random-ids one)."""
    if kind == "random-ids":
        return {}
    tolerance = w.number("hit_tolerance", default=0.05, minimum=0.0)
    if tolerance > 1.0:
        raise MatrixError(f"{w.path}: key '{w.where}.hit_tolerance': expected a share of the "
                          f"prompt tokens in [0, 1], found {tolerance}")
    if kind == "trace":
        scale = w.number("time_scale", default=1.0, minimum=0.0)
        if not scale > 0:
            raise MatrixError(f"{w.path}: key '{w.where}.time_scale': expected a factor > 0 "
                              f"(2.0: the trace at half its rate), found {scale}")
        return {"type": kind, "trace": w.text("path"), "trace_file": w.data["trace_file"],
                "trace_sha256": w.data["trace_sha256"], "time_scale": scale,
                "hit_tolerance": tolerance}
    input_len = w.integer("input_len", required=True, minimum=1)
    prefix_len = w.integer("prefix_len", required=True, minimum=1)
    if prefix_len >= input_len:
        raise MatrixError(f"{w.path}: key '{w.where}.prefix_len': expected fewer tokens than "
                          f"input_len {input_len}, found {prefix_len}")
    w.raw("prefix_share", required=True)
    share = w.number("prefix_share", minimum=0.0)
    if share > 1.0:
        raise MatrixError(f"{w.path}: key '{w.where}.prefix_share': expected the share of "
                          f"requests that start with the prefix, in [0, 1], found {share}")
    return {"type": kind, "prefix_len": prefix_len, "prefix_share": share,
            "hit_tolerance": tolerance}


def _slo(w: Reader, num_requests: int) -> SloSpec | None:
    slo = read_slo(w, num_requests)
    output_len = w.integer("output_len", required=True, minimum=1)
    decode = [lim.key for lim in (slo.limits if slo else ()) if lim.metric in ("tpot", "itl")]
    if decode and output_len < 2:
        raise MatrixError(f"{w.path}: key '{w.where}.slo.{decode[0]}': expected a workload with "
                          f"output_len ≥ 2 (TPOT and ITL need a second token), found "
                          f"output_len = {output_len}")
    return slo


def _burstiness(w: Reader) -> float:
    value = w.number("burstiness", default=1.0, minimum=0.0)
    if not value > 0:
        raise MatrixError(f"{w.path}: key '{w.where}.burstiness': expected a number > 0 "
                          f"(1 = Poisson, < 1 burstier, > 1 more regular), found {value!r}")
    return value


def _objective(w: Reader) -> tuple[str, ...]:
    """``objective = "output_tps"`` or ``["output_tps", "tpot_p50_s"]``: the primary metric
    and an optional tie-break, each one of OBJECTIVE_METRICS."""
    value = w.raw("objective")
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    known = ", ".join(OBJECTIVE_METRICS)
    if (not isinstance(names, list) or not 1 <= len(names) <= 2
            or not all(isinstance(n, str) for n in names)):
        raise MatrixError(f"{w.path}: key '{w.where}.objective': expected a metric name or a "
                          f"list of one or two ({known}), found {shown_value(value)}")
    for name in names:
        if name not in OBJECTIVE_METRICS:
            raise MatrixError(f"{w.path}: key '{w.where}.objective': expected one of {known}, "
                              f"found {name!r}")
    return tuple(names)


def _clusters(top: Reader, engine: Engine) -> dict[str, Cluster]:
    tab = top.table("clusters", required=True)
    out: dict[str, Cluster] = {}
    for name in tab.keys():  # noqa: SIM118 (Reader is not a dict)
        if not _NAME.fullmatch(name):  # named in --ppsweep-cluster a,b, labels and env values
            raise MatrixError(
                f"{tab.path}: key 'clusters.{name}': expected a cluster name of letters, digits, "
                f"'_', '.' and '-' (no ',' or spaces), found {shown_value(name)}"
            )
        c = tab.table(name, required=True)
        c.only(CLUSTER_KEYS)
        kind = c.choice("kind", tuple(CLUSTER_KINDS), required=True)
        spec = CLUSTER_KINDS[kind]
        launcher = c.choice("launcher", LAUNCHERS, default="process")
        if launcher not in spec.launchers:
            expected = " or ".join(repr(x) for x in spec.launchers)
            raise MatrixError(
                f"{c.path}: key '{c.where}.launcher': a {kind} cluster starts "
                f"{spec.launchers_hint}; expected {expected}, found {launcher!r}"
            )
        hosts = _NODES[spec.nodes](c, kind)
        for key in (k for other in CLUSTER_KINDS.values() for k in other.own_keys):
            if key not in spec.own_keys and c.raw(key) is not None:
                owner = owner_of(key)
                raise MatrixError(
                    f"{c.path}: key '{c.where}.{key}': only a {owner} cluster takes it; "
                    f"expected kind = \"{owner}\", found kind = {kind!r}"
                )
        out[name] = Cluster(
            name=name,
            kind=kind,
            launcher=launcher,
            hosts=hosts,
            gpus_per_node=c.integer("gpus_per_node", required=True, minimum=1),
            server_module=matching(c, "server_module", _MODULE, "a Python module name",
                                   engine.server_module),
            port=c.integer("port", default=30000, minimum=1, maximum=65535),
            dist_init_port=c.integer("dist_init_port", default=20000, minimum=1, maximum=65535),
            bootstrap_port=c.integer("bootstrap_port", default=8998, minimum=1, maximum=65535),
            nvidia_smi=tuple(c.str_list("nvidia_smi", default=["nvidia-smi"])),
            env=_env(c.table("env")),
            python=c.text("python", default=""),
            ssh_user=matching(c, "ssh_user", USER_NAME, "a user name", "root"),
            ssh_key=c.text("ssh_key", default=""),
            known_hosts=c.text("known_hosts", default=""),
            verify_host_keys=c.flag("verify_host_keys", default=True),
            sudo_password_file=c.text("sudo_password_file", default=""),
            shm_size=c.text("shm_size", default="32g"),
            mounts=tuple(c.str_list("mounts", default=[])),
            settings=spec.settings.read(c) if spec.settings else None,
        )
    if not out:
        raise MatrixError(f"{top.path}: key 'clusters': expected at least one cluster, found none")
    return out


def _counted_nodes(c: Reader, kind: str) -> tuple[Host, ...]:
    """The nodes of a kind whose nodes are its allocation's (slurm), known once it is held
    (cluster/slurm.resolve); until then ``nodes`` placeholders size its layouts."""
    if c.raw("hosts") is not None:
        raise MatrixError(
            f"{c.path}: key '{c.where}.hosts': a {kind} cluster's nodes come from its "
            "allocation; expected 'nodes = <count>' instead, found 'hosts'"
        )
    n = c.integer("nodes", required=True, minimum=1)
    return tuple(Host(address=f"{kind}-node{i}", name=f"node{i}") for i in range(n))


def _hosts(c: Reader, kind: str) -> tuple[Host, ...]:
    raw = c.raw("hosts", required=True)
    if not isinstance(raw, list) or not raw:
        raise MatrixError(
            f"{c.path}: key '{c.where}.hosts': expected a non-empty list of addresses or "
            f"{{name, address}} tables, found {shown_value(raw)}"
        )
    hosts: list[Host] = []
    for i, h in enumerate(raw):
        if isinstance(h, str) and h:
            r = Reader(c.path, {"address": h}, c.where)
            addr = matching(r, "address", HOSTNAME, "a host name or IP address", "",
                            shown=f"hosts[{i}]")
            hosts.append(Host(address=addr, name=addr))
        elif isinstance(h, dict):
            r = Reader(c.path, h, f"{c.where}.hosts[{i}]")
            r.only(HOST_KEYS)
            addr = matching(r, "address", HOSTNAME, "a host name or IP address", "")
            hosts.append(Host(address=addr, name=matching(r, "name", HOSTNAME,
                                                          "a host name", addr)))
        else:
            raise MatrixError(
                f"{c.path}: key '{c.where}.hosts[{i}]': expected an address string or a "
                f"{{name, address}} table, found {shown_value(h)}"
            )
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise MatrixError(f"{c.path}: key '{c.where}.hosts': duplicate hosts in {names}")
    return tuple(hosts)


# where a kind's nodes come from (matrix/kinds.py: ClusterKind.nodes)
_NODES = {"hosts": _hosts, "count": _counted_nodes}


ENV_PLACEHOLDERS = ("host", "node_rank", "cpu_bind", "image")  # what rankspec fills in per node


def _env(tab: Reader) -> dict[str, str]:
    """An env table; each value's ``{placeholders}`` checked now (rankspec fills them per node,
    at launch, where a bad one used to be a ValueError instead of a usage error)."""
    env = tab.str_map()
    for key, value in env.items():
        try:
            parts = [(f, c, spec) for _, f, spec, c in string.Formatter().parse(value)
                     if f is not None]
        except ValueError as exc:
            parts, problem = [], str(exc)
        else:
            bad = [f"{{{f}}}" for f, c, spec in parts if f not in ENV_PLACEHOLDERS or c or spec]
            problem = f"unknown placeholder {bad[0]}" if bad else ""
        if problem:
            raise MatrixError(
                f"{tab.path}: key '{tab.where}.{key}': expected a value whose {{placeholders}} "
                f"are {', '.join('{' + f + '}' for f in ENV_PLACEHOLDERS)} (write a literal "
                f"brace as {{{{ or }}}}), found {shown_value(value)}: {problem}"
            )
    return env


def _image(sw: Reader) -> str:
    image = sw.text("image", default="")
    if image and not _IMAGE.fullmatch(image):
        raise MatrixError(
            f"{sw.path}: key 'sweep.image': expected an image reference (repository[:tag] or "
            f"@digest; no spaces, quotes or shell characters), found {shown_value(image)}"
        )
    return image


def _patterns(sw: Reader) -> tuple[str, ...]:
    """``[sweep] fatal_patterns``, each compiled now: a bad regex fails before any boot."""
    patterns = sw.str_list("fatal_patterns", default=[])
    for i, pattern in enumerate(patterns):
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            raise MatrixError(
                f"{sw.path}: key 'sweep.fatal_patterns[{i}]': expected a regular expression, "
                f"found {shown_value(pattern)} ({exc})"
            ) from None
    return tuple(patterns)


def _check_against_pool(sweep: Sweep, pool: tuple[Cluster, ...]) -> None:
    docker = [c for c in pool if NEEDS_IMAGE[c.launcher]]
    if docker and not sweep.image:  # once, here, not once per node at preflight
        raise MatrixError(
            f"{sweep.path}: key 'sweep.image': expected an image reference (cluster "
            f"{docker[0].name!r} has launcher = {docker[0].launcher!r}; or give "
            "--ppsweep-image), found nothing"
        )
    for cfg in sweep.configs:
        world = cfg.gpus
        if cfg.deployed is not None and not any(c.fits(cfg) for c in pool):
            why = " or ".join(
                f"cluster {c.name!r} ({len(c.hosts)} nodes × {c.gpus_per_node} GPUs): "
                + "; ".join(c.misfits(cfg)) for c in pool)
            raise MatrixError(
                f"{sweep.path}: key 'configs[{cfg.order}]' ({cfg.id}): expected its server "
                f"groups ({cfg.label}) to fill a cluster's nodes, each group on nodes of its "
                f"own, found {why}"
            )
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


def _profile(top: Reader, configs: tuple[Config, ...], workload: Workload) -> ProfileSpec:
    """``[profile]``: the layouts (selectors, as ``--ppsweep-config``) and the round."""
    tab = top.table("profile")
    tab.only(PROFILE_KEYS)
    layouts: list[str] = []
    for sel in tab.str_list("layouts", default=[]):
        chosen = [c.id for c in select(configs, sel)]
        if not chosen:
            raise MatrixError(
                f"{tab.path}: key 'profile.layouts': expected ids of layouts in the sweep "
                f"({', '.join(c.id for c in configs)}), found {sel!r}"
            )
        layouts.extend(c for c in chosen if c not in layouts)
    conc = tab.integer("concurrency", default=0, minimum=1)
    if conc and conc not in workload.concurrency:
        raise MatrixError(
            f"{tab.path}: key 'profile.concurrency': expected one of the workload's "
            f"concurrencies {list(workload.concurrency)}, found {conc}"
        )
    acts = tab.str_list("activities", default=["CPU", "GPU"])
    bad = [a for a in acts if a not in PROFILE_ACTIVITIES]
    if bad or not acts:
        raise MatrixError(
            f"{tab.path}: key 'profile.activities': expected a non-empty list of "
            f"{', '.join(PROFILE_ACTIVITIES)} (the profiler's activities), found {acts!r}"
        )
    return ProfileSpec(
        layouts=tuple(layouts),
        concurrency=conc,
        num_requests=tab.integer("num_requests", default=0, minimum=1),
        num_steps=tab.integer("num_steps", default=3, minimum=1),
        activities=tuple(acts),
        output_dir=tab.text("output_dir", default="/tmp/ppsweep-profile"),
        timeout_s=tab.number("timeout_s", default=120.0, minimum=0.001),
    )
