"""Shared helpers of the client benchmarks (bench_client_fidelity.py, bench_client_capacity.py).

The module top imports only the standard library, because it is also run as a script by two other
interpreters:

* ``python _benchhelp.py zero-server HOST PORT`` (needs aiohttp): a zero-delay SGLang stand-in.
  ``POST /generate`` reads the whole body, counts the ``input_ids`` (commas, no JSON parse) and at
  once writes one SGLang-shaped streamed chunk (non-empty ``text``, ``meta_info`` with
  ``prompt_tokens``, ``completion_tokens``, ``finish_reason``, ``request_received_ts``,
  ``response_sent_to_client_ts``) followed by ``data: [DONE]``. It also answers ``/health``,
  ``/v1/models``, ``/server_info``, ``/get_server_info`` and ``POST /flush_cache``.
* ``<sglang venv python> _benchhelp.py bench-serving OUT.json [--tap] -- <bench_serving args>``:
  runs ``sglang.benchmark.serving.cli_main()`` (what ``python -m sglang.bench_serving`` runs) with
  observation-only hooks, and writes per-request facts bench_serving keeps in memory but never
  writes out:

  - its request function (``ASYNC_REQUEST_FUNCS["sglang"]``) is wrapped, to keep each
    ``RequestFuncOutput``'s ``start_time`` (``perf_counter`` at send), ``ttft``, ``latency`` and
    ``success``. ``perf_counter`` is CLOCK_MONOTONIC, so ``start_time + ttft`` is converted to
    wall time with ``time.time() - time.perf_counter()`` sampled in the same process;
  - with ``--tap``, ``orjson.loads`` as seen by bench_serving's module is wrapped: after the real
    parse it stores the first parsed chunk's ``meta_info`` timestamps (and whether its ``text``
    was non-empty) in a per-request slot found through a ``contextvars`` variable set by the
    request wrapper (one dict lookup per chunk, well under a microsecond);
  - ``benchmark()`` is wrapped to read ``resource.getrusage(RUSAGE_SELF)`` and the wall clock
    around it (warmup, flush, measured requests, its ``/server_info`` calls; not the interpreter
    start-up, imports, tokenizer load and dataset generation).

  The first ``--warmup-requests`` requests seen are the warmup (bench_serving gathers them before
  the measured run starts) and are written separately. ``--repeat K --gate`` runs ``cli_main()``
  K times in the one process, run ``i > 0`` starting when the file ``OUT.json.go.<i>`` appears;
  after run ``i`` it writes OUT.json and touches ``OUT.json.done.<i>``
  (:class:`BenchServingSeries` drives this).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
DEFAULT_SGLANG_PYTHON = Path.home() / ".cache/pytest-ppsweep/venv-sglang-0.5.23/bin/python"
DEFAULT_MODELS = Path.home() / ".cache/pytest-ppsweep/models"


# --------------------------------------------------------------------------------------------
# Small statistics and environment helpers (parent side)
# --------------------------------------------------------------------------------------------


def loadavg() -> str:
    """``uptime``-style load averages and the CPU count."""
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} CPUs)"


def percentile(values: Sequence[float], q: float) -> float:
    """``np.percentile`` with linear interpolation (bench_serving's definition); NaN if empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def cpu_seconds(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds of an rusage."""
    return usage.ru_utime + usage.ru_stime


def sglang_python() -> str:
    """The SGLang venv's python: $PPSWEEP_SGLANG_PYTHON, else the provisioning default."""
    path = os.environ.get("PPSWEEP_SGLANG_PYTHON") or str(DEFAULT_SGLANG_PYTHON)
    if not Path(path).exists():
        raise SystemExit(
            f"no SGLang python at {path}: run `bash scripts/provision_sglang_cpu.sh` "
            "(or set PPSWEEP_SGLANG_PYTHON)"
        )
    return path


def tiny_tokenizer() -> str:
    """A tiny model dir with a 256-id tokenizer: $PPSWEEP_MODEL_TINY_LLAMA_H4 or the default."""
    path = os.environ.get("PPSWEEP_MODEL_TINY_LLAMA_H4") or str(DEFAULT_MODELS / "tiny-llama-h4")
    if not Path(path).is_dir():
        raise SystemExit(f"no tiny model at {path}: run `bash scripts/provision_sglang_cpu.sh`")
    return path


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers 200 (raises on timeout or when ``proc`` exits)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before {url} answered")
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(url, timeout=2) as resp,
        ):
            if resp.status == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 200 within {timeout_s} s")


def port_free(host: str, port: int) -> bool:
    """True when ``host:port`` can be bound now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 5.0) -> None:
    """SIGTERM one process we started, SIGKILL it if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def zero_server(host: str, port: int, log: Path) -> Iterator[str]:
    """Run the zero-delay server (this file, ``zero-server``) in its own process; yield its URL."""
    if not port_free(host, port):
        raise SystemExit(f"{host}:{port} is busy")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(HERE), "zero-server", host, str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://{host}:{port}"
    try:
        wait_http(url + "/health", 30, proc)
        yield url
    finally:
        stop_process(proc)


# --------------------------------------------------------------------------------------------
# bench_serving, run through this file's ``bench-serving`` launcher (parent side)
# --------------------------------------------------------------------------------------------


@dataclass
class BenchServingRun:
    """One bench_serving run: its JSONL result, per-request facts and CPU figures."""

    result: dict[str, Any]
    requests: list[dict[str, Any]]
    warmup: list[dict[str, Any]]
    bench_cpu_s: float  # rusage of the launcher around benchmark()
    bench_wall_s: float
    child_cpu_s: float  # the whole child process (start-up, imports, tokenizer, dataset)
    child_wall_s: float
    stdout: str = field(repr=False, default="")


def bench_serving_args(
    base_url: str,
    *,
    tokenizer: str,
    num_prompts: int,
    concurrency: int,
    input_len: int,
    output_len: int = 1,
    output_file: Path,
    seed: int = 1,
    flush_cache: bool = True,
) -> list[str]:
    """The bench_serving command line of the seed workload (random-ids, --tokenize-prompt)."""
    args = [
        "--backend",
        "sglang",
        "--base-url",
        base_url,
        "--dataset-name",
        "random-ids",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--tokenize-prompt",
        "--output-details",
        "--output-file",
        str(output_file),
        "--tokenizer",
        tokenizer,
        "--model",
        tokenizer,
        "--warmup-requests",
        "1",
        "--seed",
        str(seed),
        "--disable-tqdm",
    ]
    if flush_cache:
        args.append("--flush-cache")
    return args


def child_env() -> dict[str, str]:
    """Environment of a bench_serving child: offline, quiet about its deprecated module path."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONWARNINGS": "ignore::FutureWarning",
    }


def run_bench_serving(
    python: str, args: Sequence[str], workdir: Path, *, tap: bool, timeout_s: float = 900.0
) -> BenchServingRun:
    """Run bench_serving with ``args`` through the launcher; parse what it wrote."""
    out_file = Path(args[list(args).index("--output-file") + 1])
    out_file.unlink(missing_ok=True)  # bench_serving appends
    facts = workdir / f"facts-{time.monotonic_ns()}.json"
    cmd = [python, str(HERE), "bench-serving", str(facts), *(["--tap"] if tap else []), "--", *args]
    env = child_env()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout_s, check=False, cwd=workdir
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or not facts.exists() or not out_file.exists():
        raise RuntimeError(
            f"bench_serving failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-6000:]}"
        )
    lines = out_file.read_text().strip().splitlines()
    data = json.loads(facts.read_text())["runs"][-1]
    return BenchServingRun(
        result=json.loads(lines[-1]),
        requests=data["requests"],
        warmup=data["warmup"],
        bench_cpu_s=data["bench_cpu_s"],
        bench_wall_s=data["bench_wall_s"],
        child_cpu_s=cpu_seconds(after) - cpu_seconds(before),
        child_wall_s=wall,
        stdout=proc.stdout,
    )


class BenchServingSeries:
    """One bench_serving process for ``repeat`` runs, each started when :meth:`run` is called.

    The launcher runs ``cli_main()`` once, then waits for ``<facts>.go.<i>`` before run ``i``;
    so other work (our client) can run between bench_serving's runs without paying its start-up
    (imports, tokenizer) every time. Each run is a full ``cli_main()``: dataset, warmup, flush,
    measured requests, JSONL line.
    """

    def __init__(
        self,
        python: str,
        args: Sequence[str],
        workdir: Path,
        repeat: int,
        *,
        tap: bool = False,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.out_file = Path(args[list(args).index("--output-file") + 1])
        self.out_file.unlink(missing_ok=True)
        self.facts = workdir / f"facts-{time.monotonic_ns()}.json"
        self.log = workdir / f"bench_serving-{time.monotonic_ns()}.log"
        self.repeat, self.done = repeat, 0
        cmd = [
            python,
            str(HERE),
            "bench-serving",
            str(self.facts),
            "--repeat",
            str(repeat),
            "--gate",
            *(["--tap"] if tap else []),
            "--",
            *args,
        ]
        env = {**child_env(), **(extra_env or {})}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir
            )

    def run(self, timeout_s: float = 600.0) -> BenchServingRun:
        """Start the next run (the first starts by itself) and wait for its results."""
        i = self.done
        if i >= self.repeat:
            raise RuntimeError(f"all {self.repeat} runs are done")
        if i > 0:
            Path(f"{self.facts}.go.{i}").touch()
        marker, deadline = Path(f"{self.facts}.done.{i}"), time.monotonic() + timeout_s
        while not marker.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(
                    f"bench_serving run {i} did not finish (exit "
                    f"{self.proc.returncode}):\n"
                    f"{self.log.read_text(errors='replace')[-6000:]}"
                )
            time.sleep(0.02)
        self.done += 1
        data = json.loads(self.facts.read_text())["runs"][i]
        lines = self.out_file.read_text().strip().splitlines()
        return BenchServingRun(
            result=json.loads(lines[i]),
            requests=data["requests"],
            warmup=data["warmup"],
            bench_cpu_s=data["bench_cpu_s"],
            bench_wall_s=data["bench_wall_s"],
            child_cpu_s=math.nan,
            child_wall_s=math.nan,
        )

    def close(self) -> None:
        """Let the process end after its last run, or stop it."""
        if self.done >= self.repeat:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        stop_process(self.proc)

    def __enter__(self) -> BenchServingSeries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# Child side: the bench_serving launcher (runs in the SGLang venv; stdlib only here)
# --------------------------------------------------------------------------------------------


def _clock_offset() -> float:
    """``time.time() - time.perf_counter()``, the pair with the tightest bracket of 20."""
    best = (math.inf, 0.0)
    for _ in range(20):
        a = time.perf_counter()
        w = time.time()
        b = time.perf_counter()
        best = min(best, (b - a, w - (a + b) / 2))
    return best[1]


def _bench_serving_main(argv: list[str]) -> int:
    import contextvars

    sep = argv.index("--")
    facts_path, opts, bs_args = Path(argv[0]), argv[1:sep], argv[sep + 1 :]
    tap = "--tap" in opts
    repeat = int(opts[opts.index("--repeat") + 1]) if "--repeat" in opts else 1
    gated = "--gate" in opts
    warmups = int(bs_args[bs_args.index("--warmup-requests") + 1])

    import sglang.benchmark.serving as serving  # type: ignore[import-not-found]

    slot_var: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
        "ppsweep_slot", default=None
    )
    seen: list[dict[str, Any]] = []
    orig_request = serving.ASYNC_REQUEST_FUNCS["sglang"]

    async def request(request_func_input: Any, pbar: Any = None) -> Any:
        slot: dict[str, Any] = {}
        token = slot_var.set(slot)
        try:
            out = await orig_request(request_func_input, pbar)
        finally:
            slot_var.reset(token)
        slot.update(
            start_mono=out.start_time,
            ttft=out.ttft,
            latency=out.latency,
            success=bool(out.success),
            prompt_len=request_func_input.prompt_len,
            server_prompt_len=getattr(out, "prompt_len", None),
            error=(out.error or "")[:300],
        )
        seen.append(slot)
        return out

    serving.ASYNC_REQUEST_FUNCS["sglang"] = request

    if tap:
        real_orjson = serving.orjson

        class _Tap:
            """``orjson`` as bench_serving's module sees it: ``loads`` also notes chunk 1."""

            def __getattr__(self, name: str) -> Any:
                return getattr(real_orjson, name)

            @staticmethod
            def loads(data: Any) -> Any:
                obj = real_orjson.loads(data)
                slot = slot_var.get()
                if slot is not None and "chunk_sent_ts" not in slot and isinstance(obj, dict):
                    meta = obj.get("meta_info") or {}
                    slot["chunk_sent_ts"] = meta.get("response_sent_to_client_ts")
                    slot["chunk_received_ts"] = meta.get("request_received_ts")
                    slot["chunk_text_nonempty"] = bool(obj.get("text"))
                return obj

        serving.orjson = _Tap()

    usage: dict[str, float] = {}
    orig_benchmark = serving.benchmark

    async def benchmark(*a: Any, **kw: Any) -> Any:
        r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        try:
            return await orig_benchmark(*a, **kw)
        finally:
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            usage["cpu"] = cpu_seconds(r1) - cpu_seconds(r0)
            usage["wall"] = time.perf_counter() - w0

    serving.benchmark = benchmark
    runs: list[dict[str, Any]] = []
    for i in range(repeat):
        if gated and i > 0:
            _wait_file(Path(f"{facts_path}.go.{i}"), 900.0)
        seen.clear()
        usage.clear()
        sys.argv = ["sglang.bench_serving", *bs_args]
        serving.cli_main()
        offset = _clock_offset()
        for s in seen:
            s["start_wall"] = s["start_mono"] + offset
            s["first_wall"] = s["start_mono"] + s["ttft"] + offset if s["ttft"] else None
        runs.append(
            {
                "warmup": seen[:warmups],
                "requests": seen[warmups:],
                "bench_cpu_s": usage.get("cpu", math.nan),
                "bench_wall_s": usage.get("wall", math.nan),
            }
        )
        tmp = Path(f"{facts_path}.tmp")
        tmp.write_text(json.dumps({"runs": runs}))
        tmp.replace(facts_path)
        sys.stdout.flush()
        if gated:
            Path(f"{facts_path}.done.{i}").touch()
    return 0


def _wait_file(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout_s} s")
        time.sleep(0.01)


# --------------------------------------------------------------------------------------------
# Child side: the zero-delay server (needs aiohttp)
# --------------------------------------------------------------------------------------------


def _count_ids(body: bytes) -> int:
    """Number of ``input_ids`` in a JSON body, counted without parsing it (0 when absent)."""
    start = body.find(b'"input_ids"')
    if start < 0:
        return 0
    open_ = body.find(b"[", start)
    close = body.find(b"]", open_)
    if open_ < 0 or close < 0:
        return 0
    inner = body[open_ + 1 : close]
    return 0 if not inner.strip() else inner.count(b",") + 1


def _zero_server_main(host: str, port: int) -> int:
    from aiohttp import web

    model = {"object": "list", "data": [{"id": "zero", "object": "model", "owned_by": "ppsweep"}]}
    headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    counter = iter(range(1 << 62))

    async def generate(request: web.Request) -> web.StreamResponse:
        received = time.time()
        body = await request.read()
        n = _count_ids(body)
        rid = f"z{next(counter)}"
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        head = (
            b'data: {"text":" a","output_ids":[97],"meta_info":{"id":"%s","finish_reason":'
            b'{"type":"length","length":1},"prompt_tokens":%d,"completion_tokens":1,'
            b'"cached_tokens":0,"e2e_latency":0.0,"request_received_ts":%r,'
            % (rid.encode(), n, received)
        )
        await resp.write(
            head + b'"response_sent_to_client_ts":%r}}\n\ndata: [DONE]\n\n' % time.time()
        )
        await resp.write_eof()
        return resp

    async def ok(_request: web.Request) -> web.Response:
        return web.json_response({})

    async def models(_request: web.Request) -> web.Response:
        return web.json_response(model)

    async def info(_request: web.Request) -> web.Response:
        return web.json_response({"version": "zero", "internal_states": [{}]})

    app = web.Application(client_max_size=1 << 30)
    app.router.add_get("/health", ok)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/server_info", info)
    app.router.add_get("/get_server_info", info)
    app.router.add_post("/flush_cache", ok)
    app.router.add_post("/generate", generate)
    web.run_app(app, host=host, port=port, access_log=None, print=None, backlog=1024)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "bench-serving":
        sys.exit(_bench_serving_main(sys.argv[2:]))
    if len(sys.argv) == 4 and sys.argv[1] == "zero-server":
        sys.exit(_zero_server_main(sys.argv[2], int(sys.argv[3])))
    sys.exit(f"usage: {sys.argv[0]} zero-server HOST PORT | bench-serving OUT [--tap] -- ARGS")
