"""The keys a sweep file may hold and a typed reader that names file and key in every error."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pytest_ppsweep.engine.engines import ENGINES

N = TypeVar("N", int, float)


def did_you_mean(name: str, choices: Sequence[str], quote: bool = True) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to a name that is none of them
    (difflib), "" when none is close: the one rule of every unknown-name error."""
    near = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    if not near:
        return ""
    return f" (did you mean {near[0]!r}?)" if quote else f" (did you mean {near[0]}?)"

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INT_LIMIT = 2**63  # TOML integers are 64-bit; tomllib reads any size

# ``[sweep] spread_rule``: what a spread above spread_threshold does to a point's verdict.
SPREAD_RULES = ("fail", "warn")
TOP_KEYS = ("extends", "sweep", "server", "env", "configs", "workload", "clusters", "profile",
            "axes", "exclude", "include", "workloads", "compare", "comm",
            "correctness",  # [correctness]: matrix/correctnessspec.py
            "expect",  # [[expect]]: matrix/expectspec.py
            "accuracy",  # [accuracy]: matrix/accuracyspec.py
            "router")  # [router]: every P/D layout's router unless its own says otherwise
COMPARE_KEYS = ("baseline", "alpha", "min_effect_pct", "sequential", "boot_noise_pct",
                "one_boot_bound_pct")
PROFILE_KEYS = ("layouts", "concurrency", "num_requests", "num_steps", "activities", "output_dir",
                "timeout_s")
PROFILE_ACTIVITIES = ("CPU", "GPU", "MEM", "CUDA_PROFILER", "RPD")
SWEEP_KEYS = (
    "name",
    "image",
    "model_path",
    "baseline",
    "cluster",
    "ep_cap",
    "devices",
    "boot_timeout_s",
    "health_stall_s",
    "spread_threshold",
    "min_repeats",
    "max_repeats",
    "boots",
    "spread_rule",
    "fatal_patterns",
    "thresholds",
    "max_points",
    "a2a_ep_backends",
    "engine",
    "gpu_hour_usd",
    "transfer_backend",
)
# A [[configs]] entry is one serve group (pp, tp, ep) or a P/D layout (prefill and decode role
# tables, and optionally its router): never both.
CONFIG_KEYS = ("pp", "tp", "ep", "server", "env", "prefill", "decode", "router")
# [configs.prefill] / [configs.decode]: one role's servers, each of that shape on nodes of its own
ROLE_KEYS = ("pp", "tp", "ep", "dp", "servers", "nodes", "server")
# [router] / [configs.router]: a P/D layout's router (the config's keys win, key by key)
ROUTER_KEYS = ("port", "node", "policy")
ROUTER_PORT = 30080  # [router] port's default: beside the servers' 30000 on the same node
WORKLOAD_KEYS = (
    "dataset",
    "input_len",
    "output_len",
    "range_ratio",
    "concurrency",
    "num_requests",
    "repeats",
    "seed",
    "vocab_size",
    "warmup_requests",
    "api",
    "request_timeout_s",
    "round_timeout_s",
    "request_rate",
    "burstiness",
    "slo",
    "objective",
    "type",
    "path",
    "time_scale",
    "prefix_len",
    "prefix_share",
    "hit_tolerance",
)
# ``[workload] type``: random-ids prompts (the default), a Mooncake trace replayed
# (measure/tracereplay.py), or prompts with a stated shared prefix; the keys only some types take.
WORKLOAD_TYPES = ("random-ids", "trace", "shared_prefix")
WORKLOAD_TYPE_KEYS: dict[str, tuple[str, ...]] = {
    "random-ids": ("dataset", "input_len", "output_len", "range_ratio"),
    "trace": ("path", "time_scale", "hit_tolerance"),
    "shared_prefix": ("input_len", "output_len", "prefix_len", "prefix_share", "hit_tolerance"),
}
# The metrics a workload's answers can rank by (``[workload] objective``), each with whether
# more is better; results/questions.py derives the default from the workload's shape.
OBJECTIVE_METRICS: dict[str, bool] = {
    "input_tps": True, "output_tps": True, "ttft_p50_s": False, "ttft_p95_s": False,
    "tpot_p50_s": False, "itl_p50_s": False, "e2e_p50_s": False,
    # GPU board energy per total token (measure/energy.py): "least energy per token"
    "energy_j_per_total_token": False,
}
# The keys every kind of cluster takes; a kind's own keys are its row's (matrix/kinds.py:
# CLUSTER_KEYS is both)
CLUSTER_COMMON_KEYS = (
    "kind",
    "launcher",
    "hosts",
    "gpus_per_node",
    "server_module",
    "port",
    "dist_init_port",
    "bootstrap_port",
    "nvidia_smi",
    "env",
    "python",
    "ssh_user",
    "ssh_key",
    "known_hosts",
    "verify_host_keys",
    "sudo_password_file",
    "shm_size",
    "mounts",
)
HOST_KEYS = ("name", "address")
# Flags the plugin derives from the layout and the cluster, every engine's (engine/): a sweep is
# checked against its own engine's ``owned_flags``; this union serves a caller with no engine.
PLUGIN_OWNED_FLAGS: frozenset[str] = frozenset().union(*(e.owned_flags for e in ENGINES.values()))


class MatrixError(Exception):
    """A sweep file that cannot be used; the message names file, key, expected and found."""


def _matrix_error(msg: str) -> Exception:
    return MatrixError(msg)


class Reader:
    """Typed access to one TOML table; every error names the file and the dotted key."""

    def __init__(self, path: Path, data: dict[str, Any], where: str) -> None:
        self.path = path
        self.data = data
        self.where = where

    def _key(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _fail(self, key: str, expected: str, found: Any) -> Exception:
        shown = "nothing" if found is _MISSING else f"{type(found).__name__} {shown_value(found)}"
        return _matrix_error(
            f"{self.path}: key '{self._key(key)}': expected {expected}, found {shown}"
        )

    def only(self, allowed: Sequence[str]) -> None:
        for key in self.data:
            if key not in allowed:
                hint = did_you_mean(key, allowed)
                raise _matrix_error(
                    f"{self.path}: unknown key '{self._key(key)}'{hint}; expected one of "
                    f"{', '.join(allowed)}"
                )

    def keys(self) -> list[str]:
        return list(self.data)

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self.data.items())

    def raw(self, key: str, required: bool = False) -> Any:
        if key not in self.data and required:
            raise self._fail(key, "a value (required)", _MISSING)
        return self.data.get(key)

    def table(self, key: str, required: bool = False) -> Reader:
        value = self.data.get(key, _MISSING)
        if value is _MISSING:
            if required:
                raise self._fail(key, "a table (required)", value)
            return Reader(self.path, {}, self._key(key))
        if not isinstance(value, dict):
            raise self._fail(key, "a table", value)
        return Reader(self.path, value, self._key(key))

    def table_list(self, key: str) -> list[Reader]:
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self._fail(key, "an array of tables ([[" + key + "]])", value)
        return [Reader(self.path, v, f"{self._key(key)}[{i}]") for i, v in enumerate(value)]

    def _get(self, key: str, required: bool, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if required:
            raise self._fail(key, "a value (required)", _MISSING)
        return default

    def text(self, key: str, required: bool = False, default: str = "") -> str:
        value = self._get(key, required, default)
        if not isinstance(value, str):
            raise self._fail(key, "a string", value)
        if "\x00" in value:  # no argument, environment value or path can hold one
            raise self._fail(key, "a string without NUL characters", value)
        if required and not value:
            raise self._fail(key, "a non-empty string", value)
        return value

    def choice(
        self, key: str, choices: Sequence[str], required: bool = False, default: str = ""
    ) -> str:
        value = self.text(key, required=required, default=default)
        if value not in choices:
            raise self._fail(key, f"one of {', '.join(repr(c) for c in choices)}", value)
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        value = self._get(key, False, default)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false", value)
        return value

    def integer(
        self,
        key: str,
        required: bool = False,
        default: int = 0,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        value = self._get(key, required, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer", value)
        if not -INT_LIMIT <= value < INT_LIMIT:
            raise self._fail(key, "an integer of at most 64 bits", value)
        # Defaults are the code's own: only what the file says is bounded.
        return self._bounded(key, value, minimum, maximum) if key in self.data else int(value)

    def number(self, key: str, default: float = 0.0, minimum: float | None = None) -> float:
        value = self._get(key, False, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(key, "a number", value)
        if isinstance(value, int) and not -INT_LIMIT <= value < INT_LIMIT:
            raise self._fail(key, "a number of at most 64 bits", value)
        if not math.isfinite(value):
            raise self._fail(key, "a finite number", value)
        return self._bounded(key, float(value), minimum, None) if key in self.data else float(value)

    def _bounded(self, key: str, value: N, minimum: N | None, maximum: N | None) -> N:
        if minimum is not None and value < minimum:
            raise self._fail(key, f"a value ≥ {minimum}", value)
        if maximum is not None and value > maximum:
            raise self._fail(key, f"a value ≤ {maximum}", value)
        return value

    def str_list(self, key: str, default: list[str]) -> list[str]:
        value = self._get(key, False, default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._fail(key, "a list of strings", value)
        if any("\x00" in v for v in value):
            raise self._fail(key, "strings without NUL characters", value)
        return list(value)

    def int_list(self, key: str, required: bool = False, minimum: int = 1) -> list[int]:
        value = self._get(key, required, [])
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise self._fail(key, "a non-empty list of integers", value)
        for v in value:
            if v < minimum:
                raise self._fail(key, f"integers ≥ {minimum}", v)
            if v >= INT_LIMIT:
                raise self._fail(key, "integers of at most 64 bits", v)
        return list(value)

    def str_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in self.data.items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise self._fail(key, "a string (environment value)", value)
            if not _ENV_NAME.fullmatch(key):  # POSIX portable names: no '=', '-', space or NUL
                raise self._fail(key, "an environment variable name (letters, digits and '_', "
                                 "not starting with a digit)", key)
            if isinstance(value, str) and "\x00" in value:
                raise self._fail(key, "an environment value without NUL characters", value)
            if isinstance(value, int) and not -INT_LIMIT <= value < INT_LIMIT:
                raise self._fail(key, "a string (environment value)", value)
            out[key] = str(value)
        return out


def shown_value(value: Any, limit: int = 200) -> str:
    """``repr`` for an error message: cut to ``limit`` characters, and safe for integers too
    long for ``repr`` (more than 4,300 digits) and for structures nested too deeply."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT_LIMIT:
        return f"<an integer of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"<a {type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[:limit] + "…"


class _Missing:
    def __repr__(self) -> str:
        return "nothing"


_MISSING: Any = _Missing()


# A host address or name, and a user name: they go into ``ssh://user@address``, ssh's argv and
# Slurm's, where a leading '-', a space or '@' would be read as something else.
HOSTNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:%-]*|\[[0-9A-Fa-f:.%]+\]")
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def matching(r: Reader, key: str, pattern: re.Pattern[str], what: str, default: str,
             shown: str = "") -> str:
    """A text key that must match ``pattern`` (required when ``default`` is empty): a value
    that goes into a command line as one argument."""
    value = r.text(key, required=not default, default=default)
    if not pattern.fullmatch(value):
        raise MatrixError(
            f"{r.path}: key '{r.where}.{shown or key}': expected {what} (no spaces, quotes or "
            f"shell characters), found "
            f"{shown_value(value)}"
        )
    return value


def optional_matching(r: Reader, key: str, pattern: re.Pattern[str], what: str) -> str:
    """An optional text key: "" when absent, else it must match ``pattern``."""
    if r.raw(key) is None:
        return ""
    return matching(r, key, pattern, what, "")
