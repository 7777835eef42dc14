"""Axes of a sweep: the product of the layouts and named axes, ``exclude``/``include`` rules,
named workloads, SGLang's EP rewrite and the ids of the points.

A point is a :class:`~pytest_ppsweep.matrix.model.Config`: a layout plus the axis values it
runs with (server flags in ``Config.server``, environment variables in ``Config.env``, so
everything downstream reads a point as it reads a layout) and the workload it measures. Its id
is the layout id followed by the non-default axis values (``pp8-tp4-ep4-a2a_deepep``,
``pp4-tp8-ep4-chunk16k``) and, when the sweep has several workloads, the workload name. An
axis's default is ``[server]``'s (``[env]``'s) value when set there, else the axis's first
value; a sweep without axes keeps its ids (``test_matrix/ppsweep.toml``).

Sweep file::

    [axes]
    moe_a2a_backend = ["none", "deepep", "flashinfer"]   # a server flag
    ep = [2, 4]                                          # pp, tp, ep: the layout's sizes
    [axes.env]
    SGLANG_X = ["0", "1"]                                # an environment variable

    [[exclude]]                  # every key given must match for a point to be left out
    pp = 8
    moe_a2a_backend = "flashinfer"

    [[include]]                  # a point added: pp, tp, optional ep, axis values, workload
    pp = 4
    tp = 8
    moe_a2a_backend = "deepep"

    [workloads.prefill]          # named workloads; [workload] holds their common keys
    input_len = 16384
    [workloads.decode]
    input_len = 1024
    output_len = 256
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import ENGINES, engine_of
from pytest_ppsweep.matrix.deployment import PD_ROLES
from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.matrix.schema import (
    INT_LIMIT,
    PLUGIN_OWNED_FLAGS,
    MatrixError,
    Reader,
    did_you_mean,
    shown_value,
)

__all__ = [
    "AXIS_SHORT",
    "DEFAULT_MAX_POINTS",
    "EP_SPANNING_A2A",
    "LAYOUT_AXES",
    "UNSET",
    "Axis",
    "axis_tag",
    "expand",
    "parse_axes",
]

# Short names of the axes' id parts (``a2a_deepep``, ``chunk16k``, ``mbs1``), each engine's;
# any other flag is named as written, an environment variable in lower case.
AXIS_SHORT: dict[str, str] = {k: v for e in ENGINES.values() for k, v in e.axis_short.items()}
LAYOUT_AXES = ("pp", "tp", "ep")
# The default engine's EP-spanning a2a backends (``[sweep] a2a_ep_backends`` overrides them).
EP_SPANNING_A2A = engine_of().ep_spanning_a2a
# A product larger than this is refused unless ``[sweep] max_points`` says so.
DEFAULT_MAX_POINTS = 64
# An axis value that means "do not pass the flag" (SGLang's own default applies).
UNSET = "unset"
_ID_SAFE = re.compile(r"[^A-Za-z0-9_.]+")
_WORKLOAD_NAME = re.compile(r"[a-z0-9][a-z0-9_]*")


@dataclass(frozen=True)
class Axis:
    """One named axis: ``kind`` is ``layout`` (pp/tp/ep), ``server`` or ``env``."""

    name: str
    kind: str
    values: tuple[Any, ...]
    default: Any

    @property
    def short(self) -> str:
        if self.kind == "env":
            return self.name.lower()
        return AXIS_SHORT.get(self.name, self.name)


def axis_tag(axis: Axis, value: Any) -> str:
    """The id part of ``value`` on ``axis``: ``a2a_deepep``, ``chunk16k``, ``mbs1``."""
    if isinstance(value, bool):
        return axis.short if value else f"no_{axis.short}"
    if isinstance(value, int):
        shown = f"{value // 1024}k" if value >= 1024 and value % 1024 == 0 else str(value)
        return f"{axis.short}{shown}"
    if isinstance(value, float):
        return f"{axis.short}{value:g}"
    return f"{axis.short}_{_ID_SAFE.sub('_', str(value)).strip('_') or 'empty'}"


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _same_kind(a: Any, b: Any) -> bool:
    ka, kb = _kind_of(a), _kind_of(b)
    return ka == kb or {ka, kb} == {"an integer", "a number"}


def parse_axes(top: Reader, server: Mapping[str, Any], env: Mapping[str, str],
               owned: frozenset[str] = PLUGIN_OWNED_FLAGS) -> list[Axis]:
    """``[axes]`` and ``[axes.env]``: every axis validated (name, non-empty list, one type,
    the type of ``[server]``'s value, no plugin-owned flag, no value twice)."""
    tab = top.table("axes")
    path = top.path
    axes: list[Axis] = []
    for name, raw in tab.items():
        if name == "env":
            if not isinstance(raw, dict):
                raise MatrixError(f"{path}: key 'axes.env': expected a table of environment "
                                  f"variable axes, found {shown_value(raw)}")
            continue
        where = f"axes.{name}"
        if name in owned:
            raise MatrixError(
                f"{path}: key '{where}': expected an axis over a flag the sweep may set, found "
                f"{name!r}, which the plugin sets from the layout and the cluster (use pp, tp, "
                f"ep for the layout's sizes)"
            )
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            raise MatrixError(f"{path}: key '{where}': expected a flag name (letters, digits, "
                              f"'_' and '-'), found {shown_value(name)}")
        kind = "layout" if name in LAYOUT_AXES else "server"
        values = _values(path, where, raw, kind)
        default = server.get(name, values[0]) if kind == "server" else values[0]
        typed = next((v for v in values if v != UNSET), values[0])
        if kind == "server" and name in server and not _same_kind(server[name], typed):
            raise MatrixError(
                f"{path}: key '{where}': expected values of the type of server.{name} "
                f"({_kind_of(server[name])}, {shown_value(server[name])}), found "
                f"{_kind_of(typed)} {shown_value(typed)}"
            )
        if kind == "server" and name in server and UNSET in values:
            raise MatrixError(
                f"{path}: key '{where}': expected {UNSET!r} only for a flag [server] does not "
                f"set, found server.{name} = {shown_value(server[name])}")
        axes.append(Axis(name, kind, values, default))
    env_tab = tab.table("env")
    for name, raw in env_tab.items():
        where = f"axes.env.{name}"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise MatrixError(f"{path}: key '{where}': expected an environment variable name, "
                              f"found {shown_value(name)}")
        values = tuple(str(v) for v in _values(path, where, raw, "env"))
        axes.append(Axis(name, "env", values, env.get(name, values[0])))
    return axes


def _values(path: Path, where: str, raw: Any, kind: str) -> tuple[Any, ...]:
    if not isinstance(raw, list):
        raise MatrixError(f"{path}: key '{where}': expected a list of values, found "
                          f"{_kind_of(raw)} {shown_value(raw)}")
    if not raw:
        raise MatrixError(f"{path}: key '{where}': expected a non-empty list of values, found "
                          f"an empty list")
    for i, v in enumerate(raw):
        if kind == "layout":
            ok = isinstance(v, int) and not isinstance(v, bool) and 1 <= v < INT_LIMIT
            expected = "a positive integer"
        elif kind == "env":
            ok = isinstance(v, (str, int)) and not isinstance(v, bool) and "\x00" not in str(v)
            expected = "a string (environment value)"
        else:
            ok = isinstance(v, (str, int, float, bool)) and not (
                isinstance(v, str) and "\x00" in v) and not (
                isinstance(v, int) and not isinstance(v, bool) and not -INT_LIMIT <= v < INT_LIMIT)
            expected = "a string, an integer, a number or a boolean"
        if not ok:
            raise MatrixError(f"{path}: key '{where}[{i}]': expected {expected}, found "
                              f"{_kind_of(v)} {shown_value(v)}")
        first = next((x for x in raw if x != UNSET), raw[0])
        if kind == "server" and v != UNSET and not _same_kind(v, first):
            raise MatrixError(f"{path}: key '{where}[{i}]': expected {_kind_of(raw[0])} like "
                              f"the axis's first value, found {_kind_of(v)} {shown_value(v)}")
    shown = [repr(v) for v in raw]
    if len(set(shown)) != len(shown):
        raise MatrixError(f"{path}: key '{where}': expected each value once, found "
                          f"{shown_value(raw)}")
    return tuple(raw)


def _point(cfg: Config, axes: Sequence[Axis], values: Mapping[str, Any]) -> Config:
    """``cfg`` with the axis values of one point applied (layout sizes, flags, env)."""
    pp, tp, ep = (values.get(n, getattr(cfg, n)) for n in LAYOUT_AXES)
    server, env = dict(cfg.server), dict(cfg.env)
    for axis in axes:
        if axis.name not in values:
            continue
        if axis.kind == "server" and values[axis.name] == UNSET:
            server.pop(axis.name, None)
        elif axis.kind == "server":
            server[axis.name] = values[axis.name]
        elif axis.kind == "env":
            env[axis.name] = values[axis.name]
    return replace(cfg, pp=pp, tp=tp, ep=ep, server=server, env=env)


def _matches(rule: Mapping[str, Any], facts: Mapping[str, Any]) -> bool:
    return all(k in facts and _same(facts[k], v) for k, v in rule.items())


def _same(a: Any, b: Any) -> bool:
    return bool(a == b and isinstance(a, bool) == isinstance(b, bool)) or (str(a) == str(b) and (
        isinstance(a, str) or isinstance(b, str)))


def expand(
    top: Reader,
    configs: Sequence[Config],
    server: Mapping[str, Any],
    env: Mapping[str, str],
    workloads: Sequence[str],
    ep_cap: int,
    a2a_ep_backends: Sequence[str],
    max_points: int,
    engine: Engine | None = None,
) -> tuple[tuple[Config, ...], tuple[str, ...]]:
    """The points of the sweep, in order (layouts, then axes in file order, then workloads),
    and the axis names. Raises MatrixError naming file, key, expected and found."""
    path = top.path
    axes = parse_axes(top, server, env,
                      engine.owned_flags if engine is not None else PLUGIN_OWNED_FLAGS)
    for axis in axes:
        for cfg in configs:
            if axis.kind == "server" and axis.name in cfg.server:
                raise MatrixError(
                    f"{path}: key 'configs[{cfg.order}].server.{axis.name}': expected a flag "
                    f"that is not also an axis (axes.{axis.name}), found "
                    f"{shown_value(cfg.server[axis.name])}")
    names = [a.name for a in axes]
    rules = _rules(top, "exclude", names)
    includes = _rules(top, "include", names)
    wl = list(workloads) if len(workloads) > 1 else [""]
    for j, rule in enumerate(rules):
        w = rule.get("workload")
        if w is not None and str(w) not in workloads:
            raise MatrixError(f"{path}: key 'exclude[{j}].workload': expected one of "
                              f"{', '.join(repr(x) for x in workloads)}, found {shown_value(w)}"
                              f"{did_you_mean(str(w), list(workloads))}")
    layout = [a for a in axes if a.kind == "layout"]
    if not configs and not {"pp", "tp"} <= {a.name for a in layout} and not includes:
        raise MatrixError(f"{path}: key 'configs': expected at least one [[configs]] (or "
                          f"axes pp and tp, or an [[include]]), found none")
    base = list(configs) or [Config(pp=1, tp=1, ep=1)]
    product: list[tuple[Config, dict[str, Any], str]] = []
    for cfg in base:
        for combo in itertools.product(*(a.values for a in axes)):
            values = dict(zip(names, combo, strict=True))
            for w in wl:
                product.append((cfg, values, w))
    if len(product) > max_points:
        raise MatrixError(
            f"{path}: key 'axes': expected at most {max_points} points (layouts × axes × "
            f"workloads; raise [sweep] max_points to confirm a larger sweep), found "
            f"{len(base)} × {' × '.join(str(len(a.values)) for a in axes) or '1'} × {len(wl)} "
            f"= {len(product)}")
    points: list[Config] = []
    origins: dict[str, str] = {}
    layout_given = {a.name for a in layout}
    for i, (cfg, values, w) in enumerate(product):
        if "tp" in values and "ep" not in values and cfg.ep and configs:
            values = {**values, "ep": min(ep_cap, values["tp"]) if ep_cap else cfg.ep}
        elif "tp" in values and "ep" not in values:
            values = {**values, "ep": min(ep_cap, values["tp"]) if ep_cap else 1}
        pt = _point(cfg, axes, values)
        facts = _facts(pt, axes, w)
        if any(_matches(r, facts) for r in rules):
            continue
        origin = f"configs[{cfg.order}]" if configs else "axes"
        points.append(_finish(path, pt, axes, values, w, i, origin, layout_given,
                              a2a_ep_backends, server, engine))
        _unique(path, points[-1], origins, origin)
    for j, rule in enumerate(includes):
        where = f"include[{j}]"
        for key in ("pp", "tp"):
            if key not in rule:
                raise MatrixError(f"{path}: key '{where}.{key}': expected a value (required), "
                                  f"found nothing")
        ep = rule.get("ep", min(ep_cap, rule["tp"]) if ep_cap else 1)
        values = {a.name: rule.get(a.name, a.default) for a in axes}
        values.update(pp=rule["pp"], tp=rule["tp"], ep=ep)
        w = str(rule.get("workload", wl[0]))
        if w not in wl:
            raise MatrixError(f"{path}: key '{where}.workload': expected one of "
                              f"{', '.join(repr(x) for x in wl if x)}, found {shown_value(w)}"
                              f"{did_you_mean(w, [x for x in wl if x])}")
        pt = _point(Config(pp=1, tp=1, ep=1, order=len(points)), axes, values)
        pt = replace(pt, server={k: v for k, v in pt.server.items()}, env=dict(pt.env))
        point = _finish(path, pt, axes, values, w, len(product) + j, where,
                        layout_given | set(LAYOUT_AXES), a2a_ep_backends, server, engine)
        if any(p.id == point.id for p in points):
            continue  # already a point of the product: including it again changes nothing
        points.append(point)
        _unique(path, point, origins, where)
    if not points:
        raise MatrixError(f"{path}: key 'exclude': expected at least one point left, found "
                          f"every point of the sweep excluded")
    return tuple(replace(p, order=i) for i, p in enumerate(points)), tuple(names)


def _facts(cfg: Config, axes: Sequence[Axis], workload: str) -> dict[str, Any]:
    facts: dict[str, Any] = {"pp": cfg.pp, "tp": cfg.tp, "ep": cfg.ep}
    for axis in axes:
        if axis.kind == "server":
            facts[axis.name] = cfg.server.get(axis.name, axis.default)
        elif axis.kind == "env":
            facts[axis.name] = cfg.env.get(axis.name, axis.default)
    if workload:
        facts["workload"] = workload
    return facts


def _finish(path: Path, pt: Config, axes: Sequence[Axis], values: Mapping[str, Any],
            workload: str, index: int, origin: str, layout_given: set[str],
            a2a_ep_backends: Sequence[str], server: Mapping[str, Any],
            engine: Engine | None = None) -> Config:
    """Check the layout rules, apply the engine's EP rewrite and name the point."""
    if pt.ep > pt.tp:
        raise MatrixError(f"{path}: key '{origin}' (point {index}, ep): expected EP ≤ TP (EP "
                          f"splits the TP group), found EP {pt.ep} > TP {pt.tp}")
    if pt.tp % pt.ep:
        raise MatrixError(f"{path}: key '{origin}' (point {index}, ep): expected TP % EP == 0, "
                          f"found TP {pt.tp} % EP {pt.ep} = {pt.tp % pt.ep}")
    tags = []
    for axis in axes:
        value = values.get(axis.name, axis.default)
        if axis.kind == "layout":
            continue  # the layout id carries pp, tp and ep
        if not _same(value, axis.default):
            tags.append(axis_tag(axis, value))
    asked = 0
    if engine is not None:
        pt = replace(pt, engine=engine.name)
    ep = (engine or engine_of(pt.engine)).effective_ep(pt.tp, pt.ep, {**server, **pt.server},
                                                        a2a_ep_backends)
    if ep != pt.ep:
        asked, pt = pt.ep, replace(pt, ep=ep)
    return replace(pt, tags=tuple(tags), workload=workload, asked_ep=asked,
                   axes={a.name: values.get(a.name, a.default) if a.kind != "layout"
                         else getattr(pt, a.name) for a in axes})


def _unique(path: Path, point: Config, origins: dict[str, str], origin: str) -> None:
    if point.id in origins:
        raise MatrixError(
            f"{path}: key '{origin}': duplicate configuration {point.id} (already "
            f"{origins[point.id]}); expected points that differ in their layout or axis values")
    origins[point.id] = origin


def _rules(top: Reader, key: str, names: Sequence[str]) -> list[dict[str, Any]]:
    allowed = (*LAYOUT_AXES, *[n for n in names if n not in LAYOUT_AXES], "workload")
    out = []
    for rule in top.table_list(key):
        rule.only(allowed)
        if not rule.data:
            raise MatrixError(f"{top.path}: key '{rule.where}': expected at least one of "
                              f"{', '.join(allowed)}, found an empty table")
        out.append(dict(rule.data))
    return out


def workload_names(top: Reader) -> list[str]:
    """The names of ``[workloads.<name>]``, validated (letters, digits, '_': they go in ids)."""
    names = top.table("workloads").keys()
    for name in names:
        if not _WORKLOAD_NAME.fullmatch(name):
            raise MatrixError(f"{top.path}: key 'workloads.{name}': expected a workload name "
                              f"of lower-case letters, digits and '_', found {shown_value(name)}")
    return names


def distinguish(first: Config, second: Config) -> tuple[Config, Config] | None:
    """Two ``[[configs]]`` of one layout that differ in their own server flags or env (say
    only ``moe_a2a_backend``), or, for a P/D layout, in one role's server flags: each named by
    the values it sets that the other does not share (``pp8-tp4-ep4`` and
    ``pp8-tp4-ep4-a2a_deepep``; ``p1-tp8-d1-tp8`` and ``p1-tp8-d1-tp8-prefill_chunk4k``); None
    when they do not differ."""

    def tags(a: Config, b: Config) -> tuple[str, ...]:
        out = [axis_tag(Axis(k, "server", (), None), v) for k, v in a.server.items()
               if k not in b.server or not _same(b.server[k], v)]
        out += [axis_tag(Axis(k, "env", (), None), v) for k, v in a.env.items()
                if k not in b.env or b.env[k] != v]
        for role in PD_ROLES:  # a parsed role's servers share one flags table: the first's
            mine, theirs = _role_flags(a, role), _role_flags(b, role)
            out += [f"{role}_{axis_tag(Axis(k, 'server', (), None), v)}"
                    for k, v in mine.items() if k not in theirs or not _same(theirs[k], v)]
        return (*a.tags, *out)

    one, two = replace(first, tags=tags(first, second)), replace(second, tags=tags(second, first))
    return None if one.id == two.id else (one, two)


def _role_flags(config: Config, role: str) -> Mapping[str, Any]:
    """The server flags of ``config``'s first ``role`` server ({} for a layout without one)."""
    groups = config.deployed.role_groups(role) if config.deployed is not None else ()
    return groups[0].flags if groups else {}


def rewrite_ep(configs: Sequence[Config], server: Mapping[str, Any],
               backends: Sequence[str], engine: Engine | None = None) -> tuple[Config, ...]:
    """The engine's own rewrite of EP (SGLang: EP = TP with an EP-spanning a2a backend). The
    point is labelled with the EP that runs (its id too) and keeps the EP it asked for in
    ``asked_ep``."""
    out = []
    for c in configs:
        ep = (engine or engine_of(c.engine)).effective_ep(c.tp, c.ep, {**server, **c.server},
                                                          backends)
        if ep != c.ep:
            c = replace(c, asked_ep=c.ep, ep=ep)
        out.append(c)
    return tuple(out)
