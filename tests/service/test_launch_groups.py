"""A Service starts its deployment group by group, then the router; readiness waits per group, then
for the router; teardown stops every part that started, in the reverse order, on every path (a
group that fails to start, a group that fails its boot wait, a stop interrupted by a signal).

No server boots here: the launcher is a stand-in that records each rank's start and stop, and
each group's boot wait is replaced by one that records it (tests/service/test_readiness.py tests
the wait itself). The log scan is per group: a fatal line names the group and node whose log
holds it, in the log check's lines and in a boot failure's reason."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.matrix.deployment import Deployment, Router, ServerGroup
from pytest_ppsweep.matrix.model import Config, Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.pointchecks import log_problems
from pytest_ppsweep.service.launch import GroupService, Service
from pytest_ppsweep.service.logscan import Finding
from pytest_ppsweep.service.readiness import BootFailed
from pytest_ppsweep.service.router import RouterPart

SEED = Path(__file__).resolve().parents[2] / "test_matrix" / "ppsweep.toml"

Events = list[tuple[str, str]]


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return load(SEED, None)


def _pd() -> Config:
    return Config(2, 8, 8, tags=("pd",), deployed=Deployment(
        (ServerGroup("prefill", 2, 8, 8, nodes=2, label="prefill"),
         ServerGroup("decode", 1, 16, 16, nodes=2, label="decode")),
        router=Router(port=30100)))


class Rank:
    def __init__(self, name: str, events: Events, refuse: bool = False) -> None:
        self.name, self.events, self.refuse = name, events, refuse
        self.stopped = False

    def poll(self) -> int | None:
        return 0 if self.stopped else None

    def stop(self, grace_s: float = 5.0) -> int | None:
        if not self.stopped:
            self.events.append(("stop", self.name))
            self.stopped = True
            if self.refuse:
                raise KeyboardInterrupt  # a signal arrives while this rank stops
        return 0


class Launcher:
    """Records every rank's start; ``fail``: the rank ("decode-node1") whose start raises."""

    def __init__(self, events: Events, fail: str = "", refuse: str = "") -> None:
        self.events, self.fail, self.refuse = events, fail, refuse

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> Rank:
        name = f"{spec.group}-node{spec.node_rank}"
        assert log_path.name == f"{name}.log"  # each group's logs under its label
        if name == self.fail:
            raise OSError(f"{name}: could not start")
        self.events.append(("start", name))
        return Rank(name, self.events, refuse=name == self.refuse)


class FakeRouter:
    name = "router"

    def __init__(self, events: Events) -> None:
        self.events = events

    def start(self) -> None:
        self.events.append(("start", "router"))

    def wait_ready(self, timeout_s: float) -> float:
        self.events.append(("ready", "router"))
        return 0.1

    def stop(self) -> None:
        self.events.append(("stop", "router"))


def _waits(monkeypatch: pytest.MonkeyPatch, events: Events, fail: str = "") -> None:
    def wait_ready(group: GroupService, timeout_s: float) -> float:
        events.append(("ready", group.group.label))
        if group.group.label == fail:
            raise BootFailed(f"{fail}: rank 0 exited")
        group.boot_s = 1.0
        return 1.0

    monkeypatch.setattr(GroupService, "wait_ready", wait_ready)


def _service(sweep: Sweep, tmp_path: Path, events: Events, **launcher: str) -> Service:
    return Service(sweep, sweep.cluster(None), _pd(), tmp_path / "logs",
                   launcher=Launcher(events, **launcher), router=FakeRouter(events))


STARTS = [("start", "prefill-node0"), ("start", "prefill-node1"),
          ("start", "decode-node0"), ("start", "decode-node1")]


def _stops(*names: str) -> set[tuple[str, str]]:
    return {("stop", n) for n in names}


def test_groups_start_in_order_then_the_router_once_they_are_ready_and_stop_in_reverse(
        sweep: Sweep, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: Events = []
    _waits(monkeypatch, events)
    service = _service(sweep, tmp_path, events)
    hosts = sweep.cluster(None).hosts
    assert service.target_url == f"http://{hosts[0].address}:30100"  # the router's
    assert [s.address for s in service.specs] == [h.address for h in hosts]
    service.start()
    service.wait_ready(60)
    assert events[:4] == STARTS  # rank 0 of a group first; the group's others at once
    # the router once every server is ready
    assert events[4:] == [("ready", "prefill"), ("ready", "decode"), ("start", "router"),
                          ("ready", "router")]
    assert service.registry.live == 4
    del events[:]
    service.stop()
    assert events[0] == ("stop", "router")
    assert set(events[1:3]) == _stops("decode-node0", "decode-node1")
    assert set(events[3:]) == _stops("prefill-node0", "prefill-node1")
    assert service.registry.live == 0
    launch = (tmp_path / "logs" / "launch.sh").read_text()
    assert "# prefill-node0 (" in launch and "# decode-node1 (" in launch


def test_a_second_group_that_fails_to_start_stops_what_started_in_reverse(
        sweep: Sweep, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: Events = []
    _waits(monkeypatch, events)
    service = _service(sweep, tmp_path, events, fail="decode-node1")
    with pytest.raises(OSError, match="decode-node1: could not start"), service:
        pass
    assert events[:3] == STARTS[:3]
    # decode's started rank first, then prefill's; the router never started, never stopped
    assert events[3] == ("stop", "decode-node0")
    assert set(events[4:]) == _stops("prefill-node0", "prefill-node1")
    assert ("start", "router") not in events and ("stop", "router") not in events
    assert service.boot_error == "decode-node1: could not start"
    assert service.registry.live == 0


def test_a_second_group_that_fails_its_boot_wait_stops_everything_in_reverse(
        sweep: Sweep, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: Events = []
    _waits(monkeypatch, events, fail="decode")
    service = _service(sweep, tmp_path, events)
    with pytest.raises(BootFailed, match="decode: rank 0 exited"), service:
        pass
    stops = events[events.index(("ready", "decode")) + 1:]
    # the router starts once every group is ready: it never started, nothing stops it
    assert ("start", "router") not in events and ("stop", "router") not in events
    assert set(stops[0:2]) == _stops("decode-node0", "decode-node1")
    assert set(stops[2:]) == _stops("prefill-node0", "prefill-node1")
    assert service.registry.live == 0


def test_a_signal_during_teardown_still_stops_every_group(
        sweep: Sweep, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: Events = []
    _waits(monkeypatch, events)
    service = _service(sweep, tmp_path, events, refuse="decode-node0")
    service.start()
    service.wait_ready(60)
    del events[:]
    with pytest.raises(KeyboardInterrupt):
        service.stop()
    assert set(events) == _stops("router", "decode-node0", "decode-node1", "prefill-node0",
                                 "prefill-node1")
    assert events.index(("stop", "prefill-node0")) > events.index(("stop", "decode-node0"))


def test_a_deployment_with_a_router_gets_the_engines_router_and_none_without(
        sweep: Sweep, tmp_path: Path) -> None:
    """Given no router part, a deployment with a router gets its engine's, started by the
    cluster's launcher on the router's node and aimed at every prefill and decode server
    (service/router.py); a layout of one serve group is given none, and refuses one."""
    service = Service(sweep, sweep.cluster(None), _pd(), tmp_path, launcher=Launcher([]))
    router = service.router
    assert isinstance(router, RouterPart) and router.workers == 2
    assert router.url == service.target_url == f"http://{sweep.cluster(None).hosts[0].address}:30100"
    argv = " ".join(router.spec.argv)
    assert "-m sglang_router.launch_router --pd-disaggregation --prefill" in argv
    assert router.labels["ppsweep.node_rank"] == "router"
    single = Config(4, 8, 4)
    with pytest.raises(ValueError, match="pp4-tp8-ep4: the deployment has no router, the "
                       "service was given one"):
        Service(sweep, sweep.cluster(None), single, tmp_path, launcher=Launcher([]),
                router=FakeRouter([]))


# -- the log scan per group ---------------------------------------------------------------------

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


class LoggedRouter(FakeRouter):
    """A router that keeps a log: its fatal lines are scanned as a group's are."""

    def __init__(self, events: Events, findings: list[Finding]) -> None:
        super().__init__(events)
        self.found = findings

    def findings(self) -> list[Finding]:
        return list(self.found)


def test_a_fatal_line_in_the_decode_groups_log_is_named_on_the_decode_group(
        sweep: Sweep, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: Events = []
    _waits(monkeypatch, events)
    service = _service(sweep, tmp_path, events)
    service.start()
    (tmp_path / "logs" / "decode-node1.log").write_text("loading\n" + OOM)
    (tmp_path / "logs" / "prefill-node1.log").write_text("loading\nready\n")
    scans = {scan.label: scan for scan in service.log_scans()}
    assert list(scans) == ["prefill", "decode"]  # no router log: the fake keeps none
    assert scans["prefill"].findings == [] and scans["decode"].role == "decode"
    [found] = scans["decode"].findings
    decode_host = sweep.cluster(None).hosts[3].name  # decode's node1: the cluster's fourth
    assert found.where == f"decode group pp1-tp16-ep16 node1 ({decode_host})"
    # what test_logs_clean prints: the group and node first, then the file and line
    [problem] = log_problems(service.findings())
    assert problem.startswith(f"decode group pp1-tp16-ep16 node1 ({decode_host}): ")
    assert problem.endswith("decode-node1.log:2: [cuda-oom] " + OOM.strip())
    service.stop()


def test_a_routers_log_is_scanned_after_the_groups(sweep: Sweep, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    events: Events = []
    _waits(monkeypatch, events)
    line = Finding("traceback", "router.log", 3, "Traceback (most recent call last):")
    service = Service(sweep, sweep.cluster(None), _pd(), tmp_path / "logs",
                      launcher=Launcher(events), router=LoggedRouter(events, [line]))
    assert [(s.label, s.role, s.findings) for s in service.log_scans()] == [
        ("prefill", "prefill", []), ("decode", "decode", []), ("router", "router", [line])]
    assert service.findings() == [line]


def test_a_boot_that_fails_on_the_decode_groups_fatal_line_names_the_decode_group(
        sweep: Sweep, tmp_path: Path) -> None:
    """The boot wait of the decode group (readiness): its reason names the group and node whose
    log holds the fatal line, not a bare node number that both groups have."""
    events: Events = []
    service = _service(sweep, tmp_path, events)
    service.start()
    (tmp_path / "logs" / "decode-node1.log").write_text(OOM)
    decode_host = sweep.cluster(None).hosts[3].name
    with pytest.raises(BootFailed) as failed:
        service.groups[1].wait_ready(30)
    assert failed.value.reason.startswith(
        f"fatal line in decode group pp1-tp16-ep16 node1 ({decode_host})'s log: ")
    assert "decode-node1.log:1: [cuda-oom]" in str(failed.value)
    service.stop()
