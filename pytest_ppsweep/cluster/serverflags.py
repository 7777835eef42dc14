"""The server's own argument list, read from node 0 during preflight, and the sweep's server
flags, ``[axes]`` keys and enumerated values checked against it before anything boots.

A typo in a server flag (``chunked_prefil_size``) used to pass validation and fail at boot, one
boot per layout, with ~100 lines of argparse usage. The list is read from the parser itself:
:data:`ARGS_SCRIPT` runs ``python -m <server_module> --help`` with ``argparse`` intercepted, so
the first parser that is asked to parse (SGLang's ``prepare_server_args``, the emulator's
``build_parser``) is dumped as JSON and the process exits before anything is loaded or started.
A server module that parses no arguments this way yields no list and no check (never a false
error).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_ppsweep.matrix.axes import UNSET
from pytest_ppsweep.matrix.model import Config, Sweep
from pytest_ppsweep.matrix.schema import PLUGIN_OWNED_FLAGS, did_you_mean, shown_value

__all__ = ["ARGS_SCRIPT", "FlagsRead", "ServerFlags", "check", "parse_dump", "probe_argv",
           "read_back"]

MARKER = "PPSWEEP_SERVER_FLAGS "
# Run as ``python -c ARGS_SCRIPT <module>``: the first parser with long options that parses is
# dumped (option strings, choices, whether it takes a value) and the process ends at once.
ARGS_SCRIPT = r"""
import argparse, importlib.util, json, os, runpy, sys
module = sys.argv[1]
try:
    found = importlib.util.find_spec(module) is not None
except Exception:
    found = False
if not found:
    sys.exit(3)
original = argparse.ArgumentParser.parse_known_args
def dump(self, args=None, namespace=None):
    acts = [a for a in self._actions if a.option_strings]
    if sum(1 for a in acts if not isinstance(a, argparse._HelpAction)) < 3:
        return original(self, args, namespace)
    out = []
    for a in acts:
        choices = None
        if a.choices is not None:
            try:
                choices = [str(c) for c in list(a.choices)[:500]]
            except TypeError:
                choices = None
        out.append({"flags": list(a.option_strings), "choices": choices,
                    "takes_value": a.nargs != 0})
    sys.stdout.write("PPSWEEP_SERVER_FLAGS " + json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)
argparse.ArgumentParser.parse_known_args = dump
sys.argv = [module, "--help"]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except BaseException:
    pass
os._exit(4)
"""
# Exit statuses of ARGS_SCRIPT: the dump was printed; the module is not importable; it is, but
# it parsed no arguments this way (no list, no check).
DUMPED, NOT_IMPORTABLE, NO_PARSER = 0, 3, 4


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


def probe_argv(python: str, module: str) -> list[str]:
    """The command that prints ``module``'s argument list: run where the engine runs, with the
    ranks' interpreter (and, by the caller, their environment, image and mounts)."""
    return [python, "-c", ARGS_SCRIPT, module]


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
    for cfg, key, value in _keys(sweep):
        if key in PLUGIN_OWNED_FLAGS:
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
