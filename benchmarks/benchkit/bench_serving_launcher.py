"""The bench_serving launcher: a program run by the SGLang venv's python (standard library only at
the top; bench_serving itself is imported in :func:`main`).

``<sglang venv python> bench_serving_launcher.py OUT.json [--tap] -- <bench_serving args>``
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

import json
import math
import resource
import sys
import time
from pathlib import Path
from typing import Any


def _cpu_seconds(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds of an rusage."""
    return usage.ru_utime + usage.ru_stime


def _clock_offset() -> float:
    """``time.time() - time.perf_counter()``, the pair with the tightest bracket of 20."""
    best = (math.inf, 0.0)
    for _ in range(20):
        a = time.perf_counter()
        w = time.time()
        b = time.perf_counter()
        best = min(best, (b - a, w - (a + b) / 2))
    return best[1]


def main(argv: list[str]) -> int:
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
            usage["cpu"] = _cpu_seconds(r1) - _cpu_seconds(r0)
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


if __name__ == "__main__":
    if len(sys.argv) >= 3 and "--" in sys.argv:
        sys.exit(main(sys.argv[1:]))
    sys.exit(f"usage: {sys.argv[0]} OUT.json [--tap] [--repeat K --gate] -- BENCH_SERVING_ARGS")
