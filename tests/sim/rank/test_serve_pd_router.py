"""P/D disaggregation through the real sglang-router: an emulated prefill server, an emulated
decode server and ``python -m sglang_router.launch_router --pd-disaggregation`` on loopback.

Streamed ``/generate`` requests (the benchmark's body) go through the router; the tokens must
arrive, each request's TTFT must cover its prefill and its modelled KV transfer, both servers must
have served every request, and nothing may be left running afterwards. The profile is ``tiny``
with a slow inter-node link, so the transfer is the larger part of the TTFT and a decode that did
not wait for it would fail the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.sim.model.costmodel import CostModel
from pytest_ppsweep.sim.model.kvtransfer import transfer_s
from pytest_ppsweep.sim.model.placement import Layout
from pytest_ppsweep.sim.model.profile import PROFILE_DIR, load_profile
from pytest_ppsweep.sim.rank.localcluster import LocalCluster

SCALE = 10.0
PROMPT = 2000  # tokens per request
NEW = 16
CONCURRENCY = 4
SLOW_LINK_GBS = 0.05  # 2000 tokens x 32 KiB = 65.5 MB -> 1.3 emulated s per transfer
PREFILL_HOST, DECODE_HOST, ROUTER_HOST = "127.0.31.1", "127.0.31.2", "127.0.31.3"


def _ports() -> tuple[int, int, int, int]:
    """(prefill http, bootstrap, decode http, router) from this process id, in 20000-45999."""
    base = 20000 + (os.getpid() % 2590) * 10
    return base, base + 2, base + 4, base + 6


def _slow_profile(tmp: Path) -> Path:
    text = (PROFILE_DIR / "tiny.toml").read_text()
    text, n = re.subn(r"(?m)^busbw_multinode_gbs = .*$", f"busbw_multinode_gbs = {SLOW_LINK_GBS}",
                      text)
    assert n == 1
    path = tmp / "tiny-slowlink.toml"
    path.write_text(text)
    return path


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _wait_router(proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float) -> None:
    """Poll the router until its readiness counts the prefill and the decode server healthy
    (bounded; the engine's own readiness rule, engine/sglang.py)."""
    engine = engine_of("sglang")
    deadline = time.monotonic() + timeout_s
    last: str | None = "no answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"router exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError):
            status, body = _get(url + engine.router_ready_path)
            last = engine.router_unready(status, body, 2)
            if last is None:
                return
        time.sleep(0.1)
    raise TimeoutError(f"router not ready after {timeout_s}s ({last}):\n"
                       f"{log.read_text()[-3000:]}")


def _counter(base_url: str, name: str) -> float:
    _, body = _get(base_url + "/metrics")
    m = re.search(rf"(?m)^sglang:{name}\{{[^}}]*\}} ([0-9.e+]+)$", body.decode())
    assert m, body.decode()[:2000]
    return float(m.group(1))


@pytest.fixture
def pd_stack(tmp_path: Path) -> Iterator[dict[str, object]]:
    """Prefill and decode servers and the router, all stopped at teardown."""
    if importlib.util.find_spec("sglang_router") is None:
        pytest.fail("sglang-router is not installed: `pip install sglang-router==0.3.2` (the "
                    "test extra of pyproject.toml installs it)")
    p_port, boot_port, d_port, r_port = _ports()
    env = {"PPSWEEP_SIM_TIME_SCALE": str(SCALE),
           "PPSWEEP_SIM_PROFILE": str(_slow_profile(tmp_path)),
           "PPSWEEP_SIM_STATE_DIR": str(tmp_path / "state"), "PPSWEEP_SIM_FAULTS": ""}
    common = ["--model-path", "/models/tiny", "--enable-metrics"]
    prefill = LocalCluster(
        hosts=[PREFILL_HOST], port=p_port, dist_port=p_port + 1,
        extra_args=[*common, "--disaggregation-mode", "prefill",
                    "--disaggregation-bootstrap-port", str(boot_port)],
        env=env, log_dir=tmp_path / "prefill")  # fmt: skip
    decode = LocalCluster(
        hosts=[DECODE_HOST], port=d_port, dist_port=d_port + 1,
        extra_args=[*common, "--disaggregation-mode", "decode"],
        env=env, log_dir=tmp_path / "decode")  # fmt: skip
    router_log = tmp_path / "router.log"
    router: subprocess.Popen[bytes] | None = None
    try:
        prefill.start()
        decode.start()
        prefill.wait_healthy(30)
        decode.wait_healthy(30)
        with router_log.open("wb") as out:
            router = subprocess.Popen(
                [sys.executable, "-m", "sglang_router.launch_router", "--pd-disaggregation",
                 "--prefill", prefill.base_url, str(boot_port), "--decode", decode.base_url,
                 "--host", ROUTER_HOST, "--port", str(r_port), "--policy", "round_robin",
                 "--log-level", "warn"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        url = f"http://{ROUTER_HOST}:{r_port}"
        _wait_router(router, url, router_log, 30)
        yield {"url": url, "prefill": prefill, "decode": decode, "router": router,
               "ports": [(PREFILL_HOST, p_port), (PREFILL_HOST, boot_port),
                         (DECODE_HOST, d_port), (ROUTER_HOST, r_port)]}
    finally:
        if router is not None and router.poll() is None:
            os.killpg(router.pid, signal.SIGTERM)
            try:
                router.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(router.pid, signal.SIGKILL)
                router.wait()
        prefill.stop()
        decode.stop()


async def _one(session: aiohttp.ClientSession, url: str, ids: list[int]) -> tuple[float, int]:
    """(TTFT in real seconds, tokens in the last chunk) of one streamed request."""
    body = engine_of("sglang").stream_request(ids, max_new_tokens=NEW)
    start = time.perf_counter()
    ttft = -1.0
    tokens = 0
    async with session.post(url + "/generate", json=body) as resp:
        assert resp.status == 200, await resp.text()
        async for line in resp.content:
            text = line.decode().strip()
            if not text.startswith("data:") or text == "data: [DONE]":
                continue
            event = json.loads(text[5:])
            assert "error" not in event, event
            if ttft < 0 and event.get("output_ids"):
                ttft = time.perf_counter() - start
            tokens = len(event["output_ids"])
    return ttft, tokens


async def _burst(url: str) -> list[tuple[float, int]]:
    async with aiohttp.ClientSession(trust_env=False) as session:
        return await asyncio.gather(*(
            _one(session, url, [(1000 * i + k) % 32000 for k in range(PROMPT)])
            for i in range(CONCURRENCY)
        ))  # fmt: skip


def _closed(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) != 0


def test_pd_through_real_router(pd_stack: dict[str, object]) -> None:
    t0 = time.monotonic()
    url = str(pd_stack["url"])
    results = asyncio.run(_burst(url))
    profile = load_profile(_slow_profile_path(pd_stack))
    prefill_s = CostModel(profile, Layout(1, 1, 1, 1)).stage_step_s(0, PROMPT, True)
    kv_s = transfer_s(profile, PROMPT, "mooncake")
    assert kv_s > 1.0  # the slow link makes the transfer the larger part
    floor = (prefill_s + kv_s) / SCALE
    for ttft, tokens in results:
        assert tokens == NEW
        assert ttft >= floor, (ttft, floor)
    # the link is shared: the last of the burst waited for the others' transfers
    assert max(t for t, _ in results) >= (prefill_s + CONCURRENCY * kv_s) / SCALE
    prefill = pd_stack["prefill"]
    decode = pd_stack["decode"]
    assert isinstance(prefill, LocalCluster) and isinstance(decode, LocalCluster)
    assert _counter(prefill.base_url, "num_requests_total") == CONCURRENCY
    assert _counter(decode.base_url, "num_requests_total") == CONCURRENCY
    assert _counter(prefill.base_url, "prompt_tokens_total") == CONCURRENCY * PROMPT
    assert _counter(decode.base_url, "generation_tokens_total") == CONCURRENCY * NEW
    print(f"PD burst: {time.monotonic() - t0:.2f}s, TTFTs {[round(t, 3) for t, _ in results]}, "
          f"floor {floor:.3f}s")
    _stop_all_and_check(pd_stack)


def _stop_all_and_check(stack: dict[str, object]) -> None:
    """Stop the router and both servers as the fixture's teardown does, then check that no
    process is left and every port is free."""
    router = stack["router"]
    prefill, decode = stack["prefill"], stack["decode"]
    assert isinstance(router, subprocess.Popen)
    assert isinstance(prefill, LocalCluster) and isinstance(decode, LocalCluster)
    procs = [router, *prefill.procs, *decode.procs]
    ports = stack["ports"]
    assert isinstance(ports, list)
    os.killpg(router.pid, signal.SIGTERM)
    router.wait(10)
    prefill.stop()
    decode.stop()
    for p in procs:
        assert p.poll() is not None
        with pytest.raises(ProcessLookupError):
            os.kill(p.pid, 0)
    assert all(_closed(h, port) for h, port in ports)


def _slow_profile_path(stack: dict[str, object]) -> str:
    prefill = stack["prefill"]
    assert isinstance(prefill, LocalCluster)
    return prefill.env["PPSWEEP_SIM_PROFILE"]
