"""Sweep-file (ppsweep.toml) text of the small end-to-end sweeps on emulated clusters, and the
seed sweep (test_matrix/ppsweep.toml) as one self-contained file the tests can edit."""

from __future__ import annotations

import tomllib
from pathlib import Path

from support.paths import REPO, SEED

# The line of test_matrix/ppsweep.toml that takes its [server], [env] and clusters from the
# shared test_matrix/cluster.toml.
SEED_EXTENDS = 'extends = "cluster.toml"\n'


def replace_once(text: str, old: str, new: str) -> str:
    """``text`` with its one ``old`` replaced by ``new``; raises when ``old`` is absent or
    occurs more than once, so that an edit of a sweep file whose shape changed fails instead of
    silently testing less."""
    found = text.count(old)
    if found != 1:
        raise ValueError(f"expected {old!r} once in the sweep text, found it {found} times")
    return text.replace(old, new)


def replace_all(text: str, old: str, new: str) -> str:
    """``text`` with every ``old`` replaced by ``new``; raises when there is none."""
    if old not in text:
        raise ValueError(f"expected {old!r} in the sweep text, found it 0 times")
    return text.replace(old, new)


def seed_text() -> str:
    """test_matrix/ppsweep.toml as one self-contained file: the tables of the shared
    test_matrix/cluster.toml (its [server], [env] and clusters, without its head comment) in
    place of the ``extends`` line. Equal in meaning (tests/matrix/test_parse_extends.py checks
    it): a test writes it into any folder and edits any of its tables in place."""
    shared = (SEED.parent / "cluster.toml").read_text(encoding="utf-8")
    tables = shared[shared.index("\n\n") + 2:]  # the head comment ends at the first blank line
    text = replace_once(SEED.read_text(encoding="utf-8"), SEED_EXTENDS, tables + "\n")
    tomllib.loads(text)  # a table both files hold would be a duplicate: fail here, not later
    return text

# Two 32-GPU layouts (4 nodes x 8 GPUs): the small sweeps of the e2e tests.
CONFIGS = """
[[configs]]
pp = 4
tp = 8

[[configs]]
pp = 8
tp = 4
"""

# The same two layouts; PP8 fails at boot with the emulator's out-of-memory fault.
BOOT_FAULT_CONFIGS = CONFIGS + """env = { PPSWEEP_SIM_FAULTS = "oom_load" }
"""


def workload(input_len: int, concurrency: tuple[int, ...], num_requests: int,
             repeats: int) -> str:
    """A ``[workload]`` table of ``input_len``-token prefill requests (one output token)."""
    concs = ", ".join(str(c) for c in concurrency)
    return f"""
[workload]
input_len = {input_len}
output_len = 1
concurrency = [{concs}]
num_requests = {num_requests}
repeats = {repeats}
vocab_size = 1000
"""


# The small sweeps' workload: 6 requests of 4,096 tokens at C=2 and C=4, 2 repeats.
SMALL_WORKLOAD = workload(4096, (2, 4), 6, 2)


def sweep_head(name: str, configs: str, cluster: str = "", boot_timeout_s: int = 60) -> str:
    """The ``[sweep]`` and ``[server]`` tables of an emulated sweep (the Kimi-K3 service's
    flags, spread rule "warn"), then ``configs``; ``cluster``: the ``[sweep] cluster`` key."""
    on = f'cluster = "{cluster}"\n' if cluster else ""
    return f"""
[sweep]
name = "{name}"
model_path = "/data/hf_models/Kimi-K3"
{on}ep_cap = 4
boot_timeout_s = {boot_timeout_s}
# The e2e sweeps are not about spread: on a loaded 2-core machine the emulator's spread can
# exceed 2 %; test_valid warns about it instead of failing (tests/e2e/test_validity_e2e.py
# covers the strict rule).
spread_rule = "warn"

[server]
moe_runner_backend = "flashinfer_mxfp4"
moe_a2a_backend = "none"
chunked_prefill_size = 8192
disable_radix_cache = true
mem_fraction_static = 0.88

{configs}
"""


SMALL_HEAD = sweep_head("e2e", "{configs}") + SMALL_WORKLOAD

CLUSTER = """
[clusters.{name}]
kind = "local"
hosts = [{hosts}]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = {port}
dist_init_port = {dist}
nvidia_smi = ["{{python}}", "-m", "pytest_ppsweep.sim.smi", "--host", "{{host}}"]
env = {{ PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}" }}
"""


def emulated_cluster(
    name: str, net: str, port: int, dist: int, scale: float, state: Path, nodes: int = 4
) -> str:
    """A local cluster of emulated nodes ``<net>.1`` … ``<net>.<nodes>`` (8 GPUs each)."""
    hosts = ", ".join(f'"{net}.{i}"' for i in range(1, nodes + 1))
    return CLUSTER.format(name=name, hosts=hosts, port=port, dist=dist, scale=scale, state=state)


def small_matrix(configs: str, net: str, port: int, dist: int, scale: float, state: Path) -> str:
    """The e2e tests' small sweep on one emulated cluster ``local``."""
    return SMALL_HEAD.format(configs=configs) + emulated_cluster(
        "local", net, port, dist, scale, state
    )


def one_node_matrix(name: str, server_module: str, port: int, dist_init_port: int,
                    pythonpath: Path | None = None) -> str:
    """A one-layout sweep (PP1/TP1, one request) on one local node that runs ``server_module``
    (a stand-in server the test provides), with no GPUs; ``pythonpath`` goes into the
    cluster's env, where the ranks (and preflight) find the module."""
    env = f'env = {{ PYTHONPATH = "{pythonpath}" }}\n' if pythonpath is not None else ""
    return f"""
[sweep]
name = "{name}"
model_path = "/nowhere"
cluster = "one"

[[configs]]
pp = 1
tp = 1

[workload]
input_len = 16
output_len = 1
concurrency = [1]
num_requests = 1
repeats = 1

[clusters.one]
kind = "local"
hosts = ["127.0.0.1"]
gpus_per_node = 1
server_module = "{server_module}"
port = {port}
dist_init_port = {dist_init_port}
nvidia_smi = []
{env}"""


def drop_table(text: str, name: str) -> str:
    """``text`` without the TOML table ``[name]`` and the comment lines just above it."""
    lines = text.splitlines(keepends=True)
    start = lines.index(f"[{name}]\n")  # ValueError: cpu.toml no longer has it
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    while end > start + 1 and (lines[end - 1].startswith("#") or not lines[end - 1].strip()):
        end -= 1  # the next table's own comment stays with it
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1
    return "".join(lines[:start] + lines[end:])


def cpu_text() -> str:
    """test_matrix/cpu.toml without its ``[accuracy]`` table: its task file is named relative
    to test_matrix/, so a copy written elsewhere would not find it, and the task is the
    docs run's (support.shared_fixtures.cpu_sweep checks it)."""
    return drop_table((REPO / "test_matrix" / "cpu.toml").read_text(encoding="utf-8"),
                      "accuracy")


def one_cpu_node_sweep(address: str, port: int, dist_init_port: int) -> str:
    """test_matrix/cpu.toml cut to its first node at ``address`` (4 GPUs declared, ports
    ``port``/``dist_init_port``): the comm tests' one-node cluster."""
    text = cpu_text()
    for i in range(2, 5):
        text = text.replace(f', "127.0.6.{i}"', "")
    return (text.replace("127.0.6.1", address).replace("gpus_per_node = 1", "gpus_per_node = 4")
            .replace("port = 34000", f"port = {port}")
            .replace("dist_init_port = 35000", f"dist_init_port = {dist_init_port}"))
