"""What a layout's log scan and GPU snapshots found, kept per server group, and the one rule that
makes configs.csv's whole-layout columns of them.

A layout of several groups (prefill and decode, a router in front) has a log set and GPUs per
group: a fatal line or a full GPU belongs to one of them, and the reader needs to know which.
:class:`LayoutFacts` holds, per group, the log scan's count and its first fatal lines, and the
worst-rank memory (used, total, headroom) at each moment of the layout
(:data:`~pytest_ppsweep.measure.gpu.MOMENTS`), each added up over the layout's boots in a run.
A layout of several groups writes it to ``metadata/<layout>.groups.json`` as produced
(:meth:`LayoutFacts.write`) and reads it back typed (:meth:`LayoutFacts.read`); a layout of one
serve group keeps its run folder as it was: configs.csv alone.

configs.csv's columns stay the whole layout's: :meth:`LayoutFacts.fatal_lines` (the sum of the
groups' counts) and :meth:`LayoutFacts.worst` (the worst rank over the groups, by
:func:`~pytest_ppsweep.measure.gpu.worst_of`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import RunFolder, RunStore, groups_json
from pytest_ppsweep.measure.gpu import MOMENTS, WorstRank, worst_of

__all__ = ["FIRST_FATAL_LINES", "GroupFacts", "GroupLogScan", "LayoutFacts"]

# How many of a group's fatal lines are kept in the file (its count is every one of them).
FIRST_FATAL_LINES = 5


@dataclass(frozen=True)
class GroupLogScan:
    """A group's log scan: how many fatal lines its logs hold and the first of them
    (``decode-node1.log:7: [cuda-oom] …``), over the layout's boots."""

    fatal_lines: int = 0
    first: tuple[str, ...] = ()

    def plus(self, lines: Iterable[str]) -> GroupLogScan:
        """This scan with another boot's fatal lines added."""
        more = list(lines)
        return GroupLogScan(self.fatal_lines + len(more),
                            (*self.first, *more)[:FIRST_FATAL_LINES])


@dataclass(frozen=True)
class GroupFacts:
    """One part of a layout: a server group (or its router: role ``router``), where it ran, its
    log scan (None until its logs were scanned) and its worst-rank memory per moment."""

    label: str
    role: str = ""
    shape: str = ""
    hosts: tuple[str, ...] = ()
    log_scan: GroupLogScan | None = None
    memory: Mapping[str, WorstRank] = field(default_factory=dict)


@dataclass(frozen=True)
class LayoutFacts:
    """The per-group facts of one layout, in the deployment's group order (the router last)."""

    config_id: str
    groups: tuple[GroupFacts, ...] = ()

    # -- the whole layout (configs.csv) -----------------------------------------------------------

    @property
    def per_group(self) -> bool:
        """Whether the layout records its facts per group: its groups are labelled (a layout of
        several). A single serve group's run folder is configs.csv alone, as it always was."""
        return any(g.label for g in self.groups)

    def fatal_lines(self) -> int:
        """The whole layout's log scan: every group's fatal lines added up."""
        return sum(g.log_scan.fatal_lines for g in self.groups if g.log_scan is not None)

    def worst(self, moment: str) -> WorstRank | None:
        """The whole layout's most loaded GPU at ``moment``: the worst of the groups' worst."""
        return worst_of(g.memory[moment] for g in self.groups if moment in g.memory)

    # -- what a run adds as it goes ---------------------------------------------------------------

    def group(self, label: str) -> GroupFacts:
        for g in self.groups:
            if g.label == label:
                return g
        return GroupFacts(label)

    def _with(self, facts: GroupFacts) -> LayoutFacts:
        if any(g.label == facts.label for g in self.groups):
            groups = tuple(facts if g.label == facts.label else g for g in self.groups)
        else:
            groups = (*self.groups, facts)
        return replace(self, groups=groups)

    def placed(self, label: str, role: str, shape: str, hosts: Iterable[str]) -> LayoutFacts:
        """Where the group ``label`` runs (its role, shape and hosts), its facts so far kept."""
        return self._with(replace(self.group(label), role=role, shape=shape, hosts=tuple(hosts)))

    def scanned(self, label: str, lines: Iterable[str], role: str = "") -> LayoutFacts:
        """The group's fatal lines of one boot added to its log scan (``role``: the part's role
        when it was not placed before: the router's entry is made here)."""
        g = self.group(label)
        scan = (g.log_scan or GroupLogScan()).plus(lines)
        return self._with(replace(g, log_scan=scan, role=g.role or role))

    def measured(self, label: str, moment: str, worst: WorstRank) -> LayoutFacts:
        """The group's worst rank at ``moment`` of one boot: kept when it is the most loaded
        over the layout's boots so far (a later boot's equal one replaces it)."""
        g = self.group(label)
        earlier = g.memory.get(moment)
        if earlier is not None and earlier.used_mib > worst.used_mib:
            worst = earlier
        return self._with(replace(g, memory={**g.memory, moment: worst}))

    # -- the file ---------------------------------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        return {"config_id": self.config_id, "groups": [
            {"label": g.label, "role": g.role, "shape": g.shape, "hosts": list(g.hosts),
             "log_scan": None if g.log_scan is None else {
                 "fatal_lines": g.log_scan.fatal_lines, "first": list(g.log_scan.first)},
             "memory": {m: {"node": w.node, "gpu": w.index, "used_mib": w.used_mib,
                            "total_mib": w.total_mib, "headroom_mib": w.headroom_mib}
                        for m, w in sorted(g.memory.items(), key=lambda e: _moment_key(e[0]))}}
            for g in self.groups]}

    @classmethod
    def from_json(cls, data: Any, source: str = groups_json("<layout>")) -> LayoutFacts:
        """The facts as written; ValueError naming ``source``, the key, what was expected and
        what was found when the file is not what :meth:`as_json` writes."""
        obj = _expect(data, dict, source, "(the file)", "an object")
        groups = _expect(obj.get("groups"), list, source, "groups", "a list")
        out = []
        for i, raw in enumerate(groups):
            where = f"groups[{i}]"
            g = _expect(raw, dict, source, where, "an object")
            scan = g.get("log_scan")
            log_scan = None
            if scan is not None:
                s = _expect(scan, dict, source, f"{where}.log_scan", "an object or null")
                first = _expect(s.get("first"), list, source, f"{where}.log_scan.first",
                                "a list of lines")
                log_scan = GroupLogScan(
                    _expect(s.get("fatal_lines"), int, source, f"{where}.log_scan.fatal_lines",
                            "an integer"), tuple(str(x) for x in first))
            memory = {}
            moments = _expect(g.get("memory", {}), dict, source, f"{where}.memory", "an object")
            for moment, w in moments.items():
                at = f"{where}.memory.{moment}"
                w = _expect(w, dict, source, at, "an object")
                memory[str(moment)] = WorstRank(
                    str(w.get("node", "")),
                    _expect(w.get("gpu"), int, source, f"{at}.gpu", "an integer"),
                    _expect(w.get("used_mib"), int, source, f"{at}.used_mib", "an integer"),
                    _expect(w.get("total_mib"), int, source, f"{at}.total_mib", "an integer"))
            out.append(GroupFacts(
                _expect(g.get("label"), str, source, f"{where}.label", "a string"),
                str(g.get("role", "")), str(g.get("shape", "")),
                tuple(str(h) for h in _expect(g.get("hosts", []), list, source,
                                              f"{where}.hosts", "a list")),
                log_scan, memory))
        return cls(str(obj.get("config_id", "")), tuple(out))

    def write(self, store: RunStore) -> Path | None:
        """``metadata/<layout>.groups.json`` rewritten with the facts so far (a layout of one
        serve group writes nothing: :attr:`per_group`)."""
        if not self.per_group:
            return None
        return store.write_json(groups_json(self.config_id), self.as_json())

    @classmethod
    def read(cls, folder: RunFolder, config_id: str) -> LayoutFacts | None:
        """The layout's per-group facts as recorded; None when the layout has no such file (a
        layout of one serve group, or one never booted); ValueError naming the file when it
        is not what a run writes."""
        path = folder.file(groups_json(config_id))
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: not JSON: {exc}") from None
        return cls.from_json(data, str(path))


def _moment_key(moment: str) -> tuple[int, str]:
    return (MOMENTS.index(moment) if moment in MOMENTS else len(MOMENTS), moment)


def _expect(value: Any, kind: type, source: str, key: str, expected: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{source}: {key}: expected {expected}, found {value!r}")
    return value
