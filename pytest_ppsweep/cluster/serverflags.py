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

from pytest_ppsweep.cluster.nodeinfo import docker_for
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.axes import UNSET
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.matrix.schema import PLUGIN_OWNED_FLAGS, did_you_mean, shown_value

__all__ = ["ARGS_SCRIPT", "ServerFlags", "check", "parse_dump", "read_in_image"]

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


def read_in_image(sweep: Sweep, cluster: Cluster, registry: Registry) -> ServerFlags | None:
    """The argument list of the server module in the image on node 0 of a docker cluster
    (process launchers read it with the module check of preflight: one interpreter start);
    ``None`` when it cannot be read (the image check says why) or parses no arguments."""
    from docker.errors import DockerException

    try:
        raw = docker_for(cluster, cluster.rank0(), registry).containers.run(
            sweep.image, ["-c", ARGS_SCRIPT, cluster.server_module],
            entrypoint=[cluster.python or "python3"], remove=True, network_mode="none",
            labels={"ppsweep.metadata": "1"},
        )
    except DockerException:
        return None
    return parse_dump(cluster.server_module, raw.decode(errors="replace"))


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
