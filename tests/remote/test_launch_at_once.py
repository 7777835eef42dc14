"""Every launcher starts the ranks after rank 0 at once and stops all ranks at once, on the
namespace hosts (real sshd, real dockerd): a container's start or stop over SSH takes ~0.5-1 s,
one node after the other it would add up per layout. Each node's start and stop is timed by the
Service itself (start_spans, stop_spans); at once means every span overlaps every other."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.processes import wait_until
from support.remote import IMAGE, TestHosts, cluster_toml, small_matrix

from pytest_ppsweep.cluster.backends import launcher_for
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.service.launch import Service

SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(300)\n"


def overlap(spans: list[tuple[float, float]]) -> bool:
    return max(b for b, _e in spans) < min(e for _b, e in spans)


@pytest.mark.parametrize("launcher", ["docker", "process"])
def test_nodes_start_and_stop_at_once(
    test_hosts: TestHosts, work: dict[str, Path], launcher: str
) -> None:
    path = work["model"].parent / f"{launcher}.toml"
    path.write_text(small_matrix("ns", work["model"], work["devices"]) + cluster_toml(
        test_hosts, name="ns", launcher=launcher, state=work["state"], scale=1000
    ))
    sweep = load(path, image=IMAGE)
    cluster = sweep.cluster("ns")
    python = "python3" if launcher == "docker" else sys.executable
    with Registry() as registry:
        service = Service(sweep, cluster, sweep.configs[0], work["model"].parent / "logs",
                          run_id=f"at-once-{launcher}", registry=registry,
                          launcher=launcher_for(cluster, sweep, registry))
        group = service.groups[0]  # the layout's one serve group
        group.specs = [replace(s, argv=(python, "-c", SLEEPER)) for s in group.specs]
        try:
            service.start()
            assert len(service.procs) == len(cluster.hosts) == 4
            for path in service.log_paths:
                wait_until(lambda p=path: "up" in p.read_text() if p.exists() else False, 60,
                           f"{path.name}: the rank's first line")
        finally:
            service.stop()
        assert all(p.poll() is not None for p in service.procs)
    starts = [service.start_spans[r] for r in (1, 2, 3)]
    assert overlap(starts), f"ranks 1-3 started one after the other: {starts}"
    stops = list(service.stop_spans.values())
    assert len(stops) == 4 and overlap(stops), f"ranks stopped one after the other: {stops}"
