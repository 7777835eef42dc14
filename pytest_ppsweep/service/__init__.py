"""Step 3, one booted layout: launch (the Service lifecycle), readiness, log scanning and read-only
probes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.service.launch import (
        Service,
    )
    from pytest_ppsweep.service.liveness import (
        HEALTH_EVERY_S,
        POLL_S,
        REFUSED_TWICE,
        WATCH_HEALTH_TIMEOUT_S,
        Death,
        LayoutDead,
        Liveness,
        Watched,
        probe_health,
    )
    from pytest_ppsweep.service.logscan import (
        FATAL_PATTERNS,
        Finding,
        LogFollower,
        LogScanner,
        root_cause,
        simulated_time_scale,
        tail,
    )
    from pytest_ppsweep.service.probe import (
        BOOT_TOKEN_ENV,
        BOOT_TOKEN_HEADER,
        Topology,
        health,
        health_and_token,
        server_info,
        topology,
    )
    from pytest_ppsweep.service.readiness import (
        HEALTH_TIMEOUT_S,
        MILESTONES,
        BootFailed,
        Booting,
        BootStatus,
        milestone,
        wait_until_ready,
    )

_NAMES = {
    "Service": "launch",
    "Death": "liveness",
    "HEALTH_EVERY_S": "liveness",
    "LayoutDead": "liveness",
    "Liveness": "liveness",
    "POLL_S": "liveness",
    "REFUSED_TWICE": "liveness",
    "WATCH_HEALTH_TIMEOUT_S": "liveness",
    "Watched": "liveness",
    "probe_health": "liveness",
    "FATAL_PATTERNS": "logscan",
    "Finding": "logscan",
    "LogFollower": "logscan",
    "LogScanner": "logscan",
    "root_cause": "logscan",
    "simulated_time_scale": "logscan",
    "tail": "logscan",
    "BOOT_TOKEN_ENV": "probe",
    "BOOT_TOKEN_HEADER": "probe",
    "Topology": "probe",
    "health": "probe",
    "health_and_token": "probe",
    "server_info": "probe",
    "topology": "probe",
    "BootFailed": "readiness",
    "BootStatus": "readiness",
    "Booting": "readiness",
    "HEALTH_TIMEOUT_S": "readiness",
    "MILESTONES": "readiness",
    "milestone": "readiness",
    "wait_until_ready": "readiness",
}
__all__ = [
    "BOOT_TOKEN_ENV",
    "BOOT_TOKEN_HEADER",
    "FATAL_PATTERNS",
    "HEALTH_EVERY_S",
    "HEALTH_TIMEOUT_S",
    "MILESTONES",
    "POLL_S",
    "REFUSED_TWICE",
    "WATCH_HEALTH_TIMEOUT_S",
    "BootFailed",
    "BootStatus",
    "Booting",
    "Death",
    "Finding",
    "LayoutDead",
    "Liveness",
    "LogFollower",
    "LogScanner",
    "Service",
    "Topology",
    "Watched",
    "health",
    "health_and_token",
    "milestone",
    "probe_health",
    "root_cause",
    "server_info",
    "simulated_time_scale",
    "tail",
    "topology",
    "wait_until_ready",
]
__getattr__ = lazy(__name__, _NAMES)
