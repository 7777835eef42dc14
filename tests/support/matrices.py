"""Sweep-file (ppsweep.toml) text of the small end-to-end sweeps on emulated clusters."""

from __future__ import annotations

from pathlib import Path

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
