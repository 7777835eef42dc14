"""Plain helpers of the end-to-end tests (matrix text, process lookup, CSV rows)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "test_matrix" / "ppsweep.toml"
ACCEPTANCE = REPO / "test_matrix" / "test_sweep.py"

SMALL = """
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

[clusters.local]
kind = "local"
hosts = ["{net}.1", "{net}.2", "{net}.3", "{net}.4"]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = {port}
dist_init_port = {dist}
nvidia_smi = ["{{python}}", "-m", "pytest_ppsweep.sim.smi", "--host", "{{host}}"]
env = {{ PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}" }}
"""

CONFIGS = """
[[configs]]
pp = 4
tp = 8

[[configs]]
pp = 8
tp = 4
"""


def sim_processes(marker: str) -> list[int]:
    """PIDs of emulator ranks whose command line holds ``marker`` (e.g. a unique port)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "pytest_ppsweep.sim" in cmd and marker in cmd:
            pids.append(int(entry.name))
    return pids


def rows(csv_path: Path) -> list[dict[str, str]]:
    if not csv_path.exists():
        return []
    with csv_path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def run_dir(reports: Path) -> Path:
    runs = [p for p in reports.iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run folder in {reports}, found {runs}"
    return runs[0]


def outcomes(text: str) -> dict[str, str]:
    """``test_x[id] PASSED`` lines of a -v run → {test id: outcome}."""
    found = re.findall(r"::(\S+) (PASSED|FAILED|ERROR|SKIPPED)", text)
    return dict(found)
