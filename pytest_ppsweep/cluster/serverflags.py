"""The server's own argument list, read from node 0 during preflight, and the sweep's server
flags, ``[axes]`` keys and enumerated values checked against it before anything boots.

A typo in a server flag (``chunked_prefil_size``) used to pass validation and fail at boot, one
boot per layout, with ~100 lines of argparse usage. The list is read from the parser itself:
:data:`ARGS_SCRIPT` runs ``python -m <server_module> --help`` with ``argparse`` intercepted, so
the first parser that is asked to parse (the engine's probe, engine/argparse_dump.py) is
dumped as JSON and the process exits before anything is loaded or started.
A server module that parses no arguments this way yields no list and no check (never a false
error).

Where the parser cannot be reached without a connection (the dry run of a cluster over SSH or
Slurm), the sweep is checked offline against the list the same probe printed for a released
engine version, kept in the project (:data:`CAPTURED_DIR`, written by
tools/capture_engine_flags.py): :func:`captured`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.engine.argparse_dump import (
    ARGS_SCRIPT,
    DUMPED,
    MARKER,
    NO_PARSER,
    NOT_IMPORTABLE,
)
from pytest_ppsweep.engine.engines import DEFAULT_ENGINE, engine_of
from pytest_ppsweep.matrix.axes import UNSET
from pytest_ppsweep.matrix.model import Config, Sweep
from pytest_ppsweep.matrix.schema import did_you_mean, shown_value

__all__ = ["ARGS_SCRIPT", "CAPTURED_DIR", "DUMPED", "NOT_IMPORTABLE", "NO_PARSER", "Captured",
           "FlagsRead", "ServerFlags", "captured", "captured_path", "check", "parse_dump",
           "probe_argv", "read_back"]

# each engine version's flag list, as its own parser printed it (tools/capture_engine_flags.py)
CAPTURED_DIR = Path(__file__).resolve().parents[1] / "engine" / "flags"


@dataclass(frozen=True)
class ServerFlags:
    """What the server module's parser accepts: every long option (``--chunked-prefill-size``)
    and, for options with choices, those choices."""

    module: str
    options: frozenset[str]
    choices: Mapping[str, tuple[str, ...]]
    takes_value: Mapping[str, bool]

    def names(self) -> list[str]:
        """The options as a sweep file writes them (``chunked_prefill_size``)."""
        return sorted({o[2:].replace("-", "_") for o in self.options})


def _option(key: str) -> str:
    return "--" + key.replace("_", "-")


def parse_dump(module: str, stdout: str) -> ServerFlags | None:
    """The parser dump in ``stdout`` (``None`` when the module printed none)."""
    line = next((x for x in stdout.splitlines() if x.startswith(MARKER)), None)
    if line is None:
        return None
    try:
        actions = json.loads(line[len(MARKER):])
    except ValueError:
        return None
    return _from_actions(module, actions)


def _from_actions(module: str, actions: Sequence[Mapping[str, Any]]) -> ServerFlags | None:
    """The flags of a parser dump's actions (None when it has no long option)."""
    options: set[str] = set()
    choices: dict[str, tuple[str, ...]] = {}
    takes: dict[str, bool] = {}
    for act in actions:
        for flag in act.get("flags", []):
            if not flag.startswith("--"):
                continue
            norm = flag.replace("_", "-")
            options.add(norm)
            takes[norm] = bool(act.get("takes_value", True))
            if act.get("choices") is not None:
                choices[norm] = tuple(act["choices"])
    return ServerFlags(module, frozenset(options), choices, takes) if options else None


@dataclass(frozen=True)
class Captured:
    """An engine version's flag list kept in the project: what its parser accepted when
    tools/capture_engine_flags.py ran it."""

    engine: str
    version: str
    path: Path
    flags: ServerFlags

    def describe(self) -> str:
        """``sglang 0.5.23's flag list (pytest_ppsweep/engine/flags/sglang-0.5.23.json, captured
        from its parser)``."""
        where = self.path.relative_to(CAPTURED_DIR.parents[2]) if self.path.is_relative_to(
            CAPTURED_DIR.parents[2]) else self.path
        return f"{self.engine} {self.version}'s flag list ({where}, captured from its parser)"


def captured_path(engine: str, version: str, folder: Path = CAPTURED_DIR) -> Path:
    """Where the flag list of ``engine`` ``version`` is kept."""
    return folder / f"{engine}-{version}.json"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version))


def captured(engine: str, module: str, folder: Path = CAPTURED_DIR) -> Captured | None:
    """The newest kept flag list of ``engine`` whose parser is ``module``'s (None: none kept;
    a list of another server module says nothing of this one)."""
    found: list[Captured] = []
    for path in sorted(folder.glob(f"{engine}-*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("engine") != engine or raw.get("module") != module:
            continue
        flags = _from_actions(f"{module} {raw['version']}", raw.get("actions") or [])
        if flags is not None:
            found.append(Captured(engine, str(raw["version"]), path, flags))
    return max(found, key=lambda c: _version_key(c.version)) if found else None


def probe_argv(python: str, module: str, engine: str = DEFAULT_ENGINE) -> list[str]:
    """The command that prints ``module``'s argument list (the engine's probe): run where the
    engine runs, with the ranks' interpreter (and, by the caller, their environment, image and
    mounts)."""
    return engine_of(engine).flags_argv(python, module)


@dataclass(frozen=True)
class FlagsRead:
    """The server's argument list as read where the engine runs, or why it was not.

    ``where`` says where the parser ran ("in image X on node 0 601 (10.0.0.1)"); ``flags`` is the
    list; ``problem``: the engine cannot start there (a preflight problem); ``unchecked``: no
    list and nothing wrong with the sweep (the module parses no arguments with argparse, or the
    parser could not be reached from here): said in the dry run, never silently skipped."""

    where: str
    flags: ServerFlags | None = None
    problem: str = ""
    unchecked: str = ""

    def problems(self, sweep: Sweep) -> list[str]:
        """The sweep's flag mistakes (file, key, expected, found), or the engine's problem."""
        if self.problem:
            return [self.problem]
        return check(sweep, self.flags) if self.flags is not None else []


def read_back(module: str, python: str, where: str, exit_status: int, stdout: str,
              stderr: str) -> FlagsRead:
    """What :data:`ARGS_SCRIPT` left (its exit status and output) as a :class:`FlagsRead`."""
    if exit_status == DUMPED:
        flags = parse_dump(module, stdout)
        if flags is not None:
            return FlagsRead(where, flags)
        return FlagsRead(where, unchecked=f"{module} printed no argument list {where}")
    if exit_status == NOT_IMPORTABLE:
        return FlagsRead(where, problem=f"server module {module} is not importable by {python} "
                         f"{where}")
    if exit_status == NO_PARSER:
        return FlagsRead(where, unchecked=f"{module} parses no arguments with argparse, so its "
                         "flags cannot be read before launch")
    tail = " | ".join(stderr.strip().splitlines()[-3:])[:300]
    return FlagsRead(where, problem=f"{python} cannot run {where} (exit {exit_status}): {tail}")


def _where(sweep: Sweep, cfg: Config | None, key: str) -> str:
    if key in sweep.axis_names:
        return f"axes.{key}"
    if cfg is not None and key in cfg.server and key not in sweep.server:
        return f"configs[{cfg.order}].server.{key}"
    return f"server.{key}"


def _keys(sweep: Sweep) -> Iterator[tuple[Config | None, str, Any]]:
    for key, value in sweep.server.items():
        yield None, key, value
    for cfg in sweep.configs:
        for key, value in cfg.server.items():
            yield cfg, key, value


def check(sweep: Sweep, flags: ServerFlags) -> list[str]:
    """Every server flag the sweep sets that the parser does not know, and every enumerated
    value outside its choices: file, key, expected and found, with "did you mean"."""
    problems: dict[str, str] = {}  # one message per key
    names = flags.names()
    owned = engine_of(sweep.engine).owned_flags
    for cfg, key, value in _keys(sweep):
        if key in owned:
            continue
        where = _where(sweep, cfg, key)
        option = _option(key)
        if option.replace("_", "-") not in flags.options:
            hint = did_you_mean(key.replace("-", "_"), names)
            problems.setdefault(where, (
                f"{sweep.file_of(where)}: key '{where}': expected a flag of {flags.module}{hint}, "
                f"found {option}, which its argument parser does not accept"))
            continue
        allowed = flags.choices.get(option.replace("_", "-"))
        if allowed and not isinstance(value, bool) and value != UNSET and str(value) not in allowed:
            hint = did_you_mean(str(value), allowed)
            choices = ", ".join(map(repr, allowed))
            problems.setdefault(f"{where}={value}", (
                f"{sweep.file_of(where)}: key '{where}': expected one of {choices} "
                f"({flags.module} {option}){hint}, found {shown_value(value)}"))
    return list(problems.values())
