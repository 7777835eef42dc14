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
    from pytest_ppsweep.service.logscan import (
        FATAL_PATTERNS,
        Finding,
        LogFollower,
        LogScanner,
        root_cause,
        tail,
    )
    from pytest_ppsweep.service.probe import (
        Topology,
        health,
        server_info,
        topology,
    )
    from pytest_ppsweep.service.readiness import (
        HEALTH_TIMEOUT_S,
        BootFailed,
        Booting,
        wait_until_ready,
    )

_NAMES = {
    "Service": "launch",
    "FATAL_PATTERNS": "logscan",
    "Finding": "logscan",
    "LogFollower": "logscan",
    "LogScanner": "logscan",
    "root_cause": "logscan",
    "tail": "logscan",
    "Topology": "probe",
    "health": "probe",
    "server_info": "probe",
    "topology": "probe",
    "BootFailed": "readiness",
    "Booting": "readiness",
    "HEALTH_TIMEOUT_S": "readiness",
    "wait_until_ready": "readiness",
}
__all__ = [
    "FATAL_PATTERNS",
    "HEALTH_TIMEOUT_S",
    "BootFailed",
    "Booting",
    "Finding",
    "LogFollower",
    "LogScanner",
    "Service",
    "Topology",
    "health",
    "root_cause",
    "server_info",
    "tail",
    "topology",
    "wait_until_ready",
]
__getattr__ = lazy(__name__, _NAMES)
