"""Plain helpers of the end-to-end tests (matrix text, process lookup, CSV rows)."""

from __future__ import annotations

import re
from pathlib import Path

from testkit import cmdline, proc_entries

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "test_matrix" / "ppsweep.toml"
ACCEPTANCE = REPO / "test_matrix" / "test_sweep.py"

SMALL_HEAD = """
[sweep]
name = "e2e"
model_path = "/data/hf_models/Kimi-K3"
ep_cap = 4
boot_timeout_s = 60

[server]
moe_runner_backend = "flashinfer_mxfp4"
moe_a2a_backend = "none"
chunked_prefill_size = 8192
disable_radix_cache = true
mem_fraction_static = 0.88

{configs}

[workload]
input_len = 4096
output_len = 1
concurrency = [2, 4]
num_requests = 6
repeats = 2
vocab_size = 1000
"""

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




def sim_processes(marker: str) -> list[int]:
    """PIDs of emulator ranks whose command line holds ``marker`` (e.g. a unique port)."""
    pids = []
    for entry in proc_entries():
        try:
            cmd = cmdline(entry)
        except OSError:
            continue
        if "pytest_ppsweep.sim" in cmd and marker in cmd:
            pids.append(int(entry.name))
    return pids






def outcomes(text: str) -> dict[str, str]:
    """``test_x[id] PASSED`` lines of a -v run → {test id: outcome}."""
    found = re.findall(r"::(\S+) (PASSED|FAILED|ERROR|SKIPPED)", text)
    return dict(found)
