"""Liveness during the whole layout: a rank that dies after health fails the running test at
once with the cause, and every later test of its layout; the sweep goes on with the next one.

Unit tests drive :class:`Liveness` on a fake service (clocks and probes injected); the load
generator's cancel event is tested against a server that never answers; the end-to-end tests
SIGKILL rank 2 of an emulated layout (loopback 127.0.62.x) mid-round and between tests.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp import web
from support.outcomes import outcomes
from support.runs import run_dir

from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts
from pytest_ppsweep.service.liveness import Death, Liveness
from pytest_ppsweep.service.logscan import LogScanner

# -- the watch on a fake service -------------------------------------------------------------


class FakeService:
    def __init__(self, tmp: Path, ranks: int = 4) -> None:
        self.scanner = LogScanner()
        self.log_paths = [tmp / f"node{r}.log" for r in range(ranks)]
        for p in self.log_paths:
            p.write_text("The server is fired up and ready to roll!\n")
        self.codes: dict[int, int] = {}

    def address(self, node_rank: int) -> str:
        return f"127.0.62.{node_rank + 1}"

    def url(self, node_rank: int) -> str:
        return f"http://{self.address(node_rank)}:1"

    def exited(self) -> list[tuple[int, int]]:
        return sorted(self.codes.items())


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def watch(svc: FakeService, answers: dict[int, int | str] | None = None, **kw: object) -> Liveness:
    answers = answers if answers is not None else {}

    def probe(url: str, _timeout: float) -> int | str:
        return answers.get(int(url.split("//")[1].split(":")[0].rsplit(".", 1)[1]) - 1, 200)

    kw.setdefault("settle_s", 0.0)  # the settling before a death is named: tests/service
    return Liveness(svc, probe=probe, wall=lambda: 0.0, **kw)  # type: ignore[arg-type]


def test_an_exit_is_a_death_naming_the_node_its_code_and_when(tmp_path: Path) -> None:
    svc, clock = FakeService(tmp_path), Clock()
    w = watch(svc, clock=clock)
    assert w.check() is None and not w.died.is_set()
    clock.t += 12.5
    svc.codes[2] = -9
    death = w.check()
    assert death == Death(2, "127.0.62.3", "rank exited with code -9 (SIGKILL)", 0.0, 12.5)
    assert str(death) == (
        "node 2 (127.0.62.3) rank exited with code -9 (SIGKILL) at 00:00:00 UTC "
        "(12.5 s after healthy)"
    )
    assert w.died.is_set()
    svc.codes[0] = 1  # what follows does not replace the first death
    assert w.check() is death


def test_of_several_exits_in_one_poll_the_root_cause_names_the_rank(tmp_path: Path) -> None:
    svc = FakeService(tmp_path)
    with svc.log_paths[2].open("a") as fh:
        fh.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    svc.codes.update({0: 1, 2: 1})
    death = watch(svc).check()
    assert death is not None and death.node_rank == 2
    assert death.what == (
        "rank exited with code 1 (also ended: node 0 code 1); fatal log line node2.log:2: "
        "[exception] RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    (tmp_path / "b").mkdir()
    svc2 = FakeService(tmp_path / "b")
    svc2.codes.update({0: 1, 3: -9})  # no log: the one killed by a signal
    assert (d := watch(svc2).check()) is not None and d.node_rank == 3


def test_a_fatal_log_line_is_a_death(tmp_path: Path) -> None:
    svc = FakeService(tmp_path)
    w = watch(svc)
    assert w.check() is None
    with svc.log_paths[1].open("a") as fh:
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    death = w.check()
    assert death is not None and death.node_rank == 1
    assert death.what.startswith("fatal log line node1.log:2: [cuda-oom] torch.OutOfMemoryError")


def test_a_rank_whose_health_is_refused_twice_is_dead_a_slow_one_only_after_the_stall(
    tmp_path: Path,
) -> None:
    svc, clock = FakeService(tmp_path), Clock()
    answers: dict[int, int | str] = {3: "refused", 1: "timeout"}
    w = watch(svc, answers, clock=clock, health_every_s=1.0, health_stall_s=30.0)
    w._check_health(clock())
    assert w.death is None  # one refusal: a restart of the listener, not yet a death
    clock.t += 1.0
    death = w._check_health(clock())
    assert death is not None and death.node_rank == 3
    assert death.what == "rank /health not answering (refused) for 1.0 s"
    svc2, clock2 = FakeService(tmp_path), Clock()
    w2 = watch(svc2, {1: "timeout"}, clock=clock2, health_stall_s=30.0)
    for _ in range(29):
        assert w2._check_health(clock2()) is None
        clock2.t += 1.0
    clock2.t += 1.0
    assert (d := w2._check_health(clock2())) is not None and d.node_rank == 1
    assert "(timeout) for 30.0 s" in d.what


def test_the_thread_sees_a_death_within_its_interval_and_stop_is_no_death(tmp_path: Path) -> None:
    svc = FakeService(tmp_path)
    w = watch(svc, interval_s=0.05).start()
    svc.codes[2] = -9
    t0 = time.monotonic()
    assert w.died.wait(2.0)
    assert time.monotonic() - t0 < 0.5
    w.stop()
    quiet = watch(FakeService(tmp_path), interval_s=0.05).start()
    quiet.stop()
    quiet.service.codes[1] = 0  # type: ignore[attr-defined]  # teardown stops the ranks
    assert quiet.check() is None and not quiet.died.is_set()
    with pytest.raises(ValueError, match="interval"):
        watch(svc, interval_s=60)


# -- the load generator's cancel event -------------------------------------------------------


def test_a_cancelled_round_ends_at_once_with_its_requests_in_flight() -> None:
    spec = WorkloadSpec(input_len=16, output_len=1, range_ratio=1.0, num_requests=4, seed=1,
                        vocab_size=100, warmup_requests=0, request_timeout_s=300,
                        round_timeout_s=300)  # fmt: skip
    prompts = generate_prompts(spec)
    started = asyncio.Event()
    cancel = threading.Event()

    async def flush(_req: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def generate(req: web.Request) -> web.StreamResponse:  # a dead stage: never answers
        resp = web.StreamResponse()
        await resp.prepare(req)
        started.set()
        await asyncio.sleep(600)
        return resp

    async def main() -> float:
        app = web.Application()
        app.router.add_post("/flush_cache", flush)
        app.router.add_post("/generate", generate)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        round_ = asyncio.create_task(
            bench.run_round(f"http://127.0.0.1:{port}", prompts, 2, spec=spec, cancel=cancel)
        )
        await asyncio.wait_for(started.wait(), 10)
        t0 = time.monotonic()
        threading.Timer(0.0, cancel.set).start()  # set from another thread, as the watch does
        with pytest.raises(bench.RoundCancelled):
            await round_
        took = time.monotonic() - t0
        await runner.cleanup()
        return took

    assert asyncio.run(main()) < 0.5


# -- end to end: a rank SIGKILLed on the emulator --------------------------------------------

# A conftest for the sweep folder: SIGKILLs rank 2 of the first layout at a chosen moment
# (``mid-round``: once the first round wrote 2 records; ``between``: after test_topology),
# and writes when it killed and when each test's failing report was made.
KILLER = '''
import json, os, signal, threading, time
from pathlib import Path

import pytest

WHEN = {when!r}
LAYOUT = "pp4-tp8-ep4"
OUT = Path({out!r})
events = []


def rank2_pid():
    for e in Path("/proc").iterdir():
        if not e.name.isdigit():
            continue
        try:
            cmd = (e / "cmdline").read_bytes().replace(b"\\0", b" ").decode()
        except OSError:
            continue
        if "pytest_ppsweep.sim" in cmd and "--port {port} " in cmd and "--node-rank 2 " in cmd:
            return int(e.name)
    return None


def kill():
    pid = rank2_pid()
    os.kill(pid, signal.SIGKILL)
    events.append(("killed", time.time(), pid))
    while Path(f"/proc/{{pid}}").exists() and "Z" not in _state(pid):
        time.sleep(0.005)


def _state(pid):
    try:
        return Path(f"/proc/{{pid}}/stat").read_text().split(")")[1].split()[0]
    except OSError:
        return "Z"


def watch_raw(reports):
    deadline = time.time() + 120
    while time.time() < deadline:
        raws = list(Path(reports).glob(f"*/raw/{{LAYOUT}}/c2-r1.jsonl"))
        if raws and len(raws[0].read_text().splitlines()) >= 2:
            kill()
            return
        time.sleep(0.01)


def pytest_configure(config):
    if WHEN == "mid-round":
        reports = config.getoption("ppsweep_reports")
        threading.Thread(target=watch_raw, args=(reports,), daemon=True).start()


def pytest_runtest_teardown(item):
    if WHEN == "between" and item.name == f"test_topology[{{LAYOUT}}]":
        kill()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.failed:
        events.append((report.nodeid, time.time(), report.when))


def pytest_unconfigure(config):
    OUT.write_text(json.dumps(events))
'''


def _run_killed(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path, when: str
) -> tuple[pytest.RunResult, list[list[object]], Path]:
    folder = sweep_dir(net="127.0.62", edits={"num_requests = 6": "num_requests = 24"})
    port = int(re.findall(r"^port = (\d+)", (folder / "ppsweep.toml").read_text(), re.M)[0])
    events = tmp_path / "events.json"
    (folder / "conftest.py").write_text(KILLER.format(when=when, out=str(events), port=port))
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess(
        str(folder), "-v", "--ppsweep-reports", str(reports), timeout=600
    )
    return result, json.loads(events.read_text()), run_dir(reports)


DEAD = re.compile(
    r"pp4-tp8-ep4: layout dead: node 2 \(127\.0\.62\.3\) rank exited with code -9 \(SIGKILL\)"
    r"(?: \(also ended: (?:[^()]|\(SIG[A-Z]+\))*\))? at "
    r"\d\d:\d\d:\d\d UTC \([\d.]+ s after healthy\)"
)


def _check_layout_failed_the_next_passed(result: pytest.RunResult, run: Path) -> dict[str, str]:
    seen = outcomes(result.stdout.str())
    first = {t: o for t, o in seen.items() if "pp4-tp8-ep4" in t}
    after = {t: o for t, o in first.items() if "test_topology" not in t}  # ran before the kill
    assert first["test_topology[pp4-tp8-ep4]"] == "PASSED"
    assert after and all(o in ("FAILED", "ERROR") for o in after.values()), first
    second = {t: o for t, o in seen.items() if "pp8-tp4-ep4" in t}
    assert second and all(o == "PASSED" for o in second.values()), second
    text = result.stdout.str()
    # every test of the dead layout names the same cause
    assert len(set(DEAD.findall(text))) == 1, text[-4000:]
    assert text.count("pp4-tp8-ep4: layout dead: node 2 (127.0.62.3)") >= len(after)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    log = (run / "progress.log").read_text()
    assert log.count("pp4-tp8-ep4: booting on") == 1 and log.count("pp8-tp4-ep4: booting on") == 1
    return first


def test_rank_2_killed_mid_round_fails_the_round_at_once_and_its_layout_the_next_passes(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result, events, run = _run_killed(pytester, sweep_dir, tmp_path, "mid-round")
    first = _check_layout_failed_the_next_passed(result, run)
    assert first["test_prefill[pp4-tp8-ep4-c2]"] == "FAILED"
    killed = next(e for e in events if e[0] == "killed")
    failed = next(e for e in events if "test_prefill[pp4-tp8-ep4-c2]" in str(e[0]))
    assert 0 < float(failed[1]) - float(killed[1]) < 2.0, (killed, failed)  # type: ignore[arg-type]
    assert "round c2 r1/2 aborted" in result.stdout.str()
    assert "pp4-tp8-ep4 C=2: round 1/2 aborted after" in (run / "progress.log").read_text()


def test_rank_2_exiting_between_tests_fails_prefill_at_once_with_the_cause(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result, events, run = _run_killed(pytester, sweep_dir, tmp_path, "between")
    first = _check_layout_failed_the_next_passed(result, run)
    assert first["test_prefill[pp4-tp8-ep4-c2]"] == "ERROR"  # in its set-up: no round ran
    killed = next(e for e in events if e[0] == "killed")
    failed = next(e for e in events if "test_prefill[pp4-tp8-ep4-c2]" in str(e[0]))
    assert failed[2] == "setup" and float(failed[1]) - float(killed[1]) < 1.0  # type: ignore[arg-type]
    assert not (run / "raw" / "pp4-tp8-ep4").exists() or not any(
        (run / "raw" / "pp4-tp8-ep4").iterdir()
    )
