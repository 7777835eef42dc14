"""The load generator: one round = N streaming requests, at most C in flight (like bench_serving).

Sequence of a round: [GET /v1/models when the completions API has no model name] → POST
/flush_cache (400 = server busy: retried with backoff up to ``flush_timeout_s``) → the warmup
prompts (excluded from results; ``warmup=False`` skips them: the sweep warms each boot's server
in its first round only) → the measured requests, all arriving at t=0 (or Poisson when
``spec.request_rate`` is finite) and gated by a semaphore of size C.

Each measured request produces one record (a dict of builtins) handed to ``on_record`` as it
completes; keys: ``index, prompt_len, send_ts`` (wall clock), ``sent_at_s, done_at_s`` (offsets
from the round start), ``ttft_s`` (send → first ``data:`` event, whatever its text), ``e2e_s``
(send → ``data: [DONE]`` or the failure), each also as ``*_raw_s`` (measured wall-clock seconds;
the plain ones are multiplied by ``time_scale``), ``prompt_tokens, completion_tokens,
cached_tokens, server_e2e_latency, server_first_token_latency, finish_reason`` (as the server
reported them, not scaled), ``http_status, ok, error_kind, error``. ``error_kind`` is one of
``stream error, aborted, truncated stream, bad stream`` (a non-JSON event, or one of the wrong
shape), ``wrong output length`` (the server counted other ``completion_tokens`` than the
``output_len`` asked with ``ignore_eos``: completion.request_problem), ``http <status>, timeout,
round timeout, connection error``; ``error`` adds the detail.
``chunk_s`` lists, for every event that carried output (``/generate``: its
``meta_info.completion_tokens`` grew, or there is no count and ``text`` is non-empty;
completions: a choice carried text), its arrival after the send (scaled, like ``ttft_s``), and
``chunk_tokens`` the completion tokens the server had counted by then (None where the event
carried no count): the per-chunk timestamps ITL is computed from (metrics.py).

A round of a workload whose prompts share prefixes on purpose (``prompts.implied_hit_rate``
set: a trace, a shared-prefix workload) also reads the server's prefix hit rate over its
measured requests: the engine's cached and prompt token counters (``/metrics``, read after the
warm-up and after the last request: their deltas; :meth:`Engine.prefix_counters`), else the sum
of the requests' own ``cached_tokens`` over their ``prompt_tokens``, else none ("not
measured", as on a server without a prefix cache: ``hits_unmeasured`` says why); RoundResult's
``hit_rate_*`` fields keep it with its source, the implied rate and the tolerance.

Timeouts are wall-clock: ``spec.request_timeout_s`` per request once sent, and
``spec.round_timeout_s`` for the measured phase; requests not finished by then fail with
"round timeout" (sent or not), so a round never hangs. Arrival gaps are in scaled seconds;
``scheduled_at_s`` is when a request was due, ``issued_at_s`` when the client reached it (before
waiting for a slot of C), both from the round start and also as ``*_raw_s``: a client behind its
schedule is detected from them (``arrivals.lag``), never silently measured as a lower rate.

``cancel`` (a ``threading.Event``, set from any thread: the service's liveness watch sets it
when a rank dies) ends a round at once: it is looked at every ``CANCEL_POLL_S``, every request
in flight is cancelled (its connection closed) and :class:`RoundCancelled` is raised, whatever
the phase (flush, warmup, measured requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from pytest_ppsweep.engine.base import Engine, json_number, json_object
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.measure.arrivals import schedule
from pytest_ppsweep.measure.completion import WRONG_OUTPUT, request_problem
from pytest_ppsweep.measure.metrics import RoundResult, summarize
from pytest_ppsweep.measure.workload import PromptSet, WorkloadSpec

__all__ = ["RECORD_KEYS", "BenchSetupError", "RoundCancelled", "RoundResult", "make_session",
           "run_round", "run_round_sync"]  # fmt: skip
OnRecord = Callable[[dict[str, Any]], None]
_JSON = {"Content-Type": "application/json"}
_PROMPT_FIELDS = ("input_len", "range_ratio", "num_requests", "seed", "vocab_size",
                  "warmup_requests")  # fmt: skip
RECORD_KEYS = (
    "index", "prompt_len", "send_ts", "sent_at_s", "sent_at_raw_s", "done_at_s", "done_at_raw_s",
    "ttft_s", "ttft_raw_s", "e2e_s", "e2e_raw_s", "prompt_tokens", "completion_tokens",
    "cached_tokens", "server_e2e_latency", "server_first_token_latency", "finish_reason",
    "http_status", "ok", "error_kind", "error", "chunk_s", "chunk_tokens",
    "scheduled_at_s", "scheduled_at_raw_s", "issued_at_s", "issued_at_raw_s",
)  # fmt: skip


class BenchSetupError(RuntimeError):
    """The round could not start (flush_cache or model discovery failed); nothing was measured."""


class RoundCancelled(RuntimeError):
    """The round's cancel event was set: its requests were cancelled; nothing is returned."""


CANCEL_POLL_S = 0.05


async def _cancellable(work: Any, cancel: threading.Event | None) -> Any:
    """Await ``work``; cancel it and raise RoundCancelled as soon as ``cancel`` is set."""
    if cancel is None:
        return await work
    task = asyncio.ensure_future(work)
    while not task.done():
        if cancel.is_set():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise RoundCancelled("round cancelled")
        await asyncio.wait({task}, timeout=CANCEL_POLL_S)
    return task.result()


class _Fail(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass
class _InFlight:
    """Requests currently sent and not finished; ``peak`` is the most seen at once."""

    now: int = 0
    peak: int = 0


def make_session(limit: int) -> aiohttp.ClientSession:
    """A session for rounds: ``limit`` connections, no aiohttp total timeout (ours apply)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, limit_per_host=0),
        timeout=aiohttp.ClientTimeout(total=None),  # aiohttp's default is a 5-minute total
        read_bufsize=2**24,  # stream lines can carry long id lists; bench_serving uses 10 MB
    )


def _new_record(index: int, prompt_len: int) -> dict[str, Any]:
    rec: dict[str, Any] = dict.fromkeys(RECORD_KEYS)
    return rec | {"index": index, "prompt_len": prompt_len, "ok": False, "chunk_s": [],
                  "chunk_tokens": []}


def _feed(rec: dict[str, Any], payload: bytes, api: str, engine: Engine | None = None) -> bool:
    """Apply one ``data:`` JSON event to the record; True when it carried output tokens.

    Raises _Fail on error/abort/garbage.
    """
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply
        raise _Fail("bad stream", f"non-JSON event: {payload[:200]!r}") from None
    if not isinstance(obj, dict):
        raise _Fail("bad stream", f"non-object event: {payload[:200]!r}")
    if "error" in obj:  # SGLang reports errors after the stream started inside a 200 stream
        err = obj["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise _Fail("stream error", f"error in stream: {str(msg)[:500]}")
    try:
        if api == "generate":
            return _feed_generate(rec, obj, engine or engine_of())
        return _feed_completions(rec, obj)
    except (AttributeError, TypeError, KeyError) as exc:  # a field of the wrong shape
        raise _Fail("bad stream", f"unexpected event ({exc}): {payload[:200]!r}") from None


def _finish(rec: dict[str, Any], kind: Any, detail: Any) -> None:
    if not isinstance(kind, str):
        raise TypeError(f"finish_reason is {type(kind).__name__}, not a string")
    if kind == "abort":
        raise _Fail("aborted", f"aborted: {str(detail)[:500]}")
    rec["finish_reason"] = kind


def _feed_generate(rec: dict[str, Any], obj: dict[str, Any], engine: Engine) -> bool:
    """One event of the engine's native streaming API (its fields read by the engine)."""
    before = rec["completion_tokens"]
    event = engine.stream_event(obj)
    rec.update(event.fields)
    if event.finish is not None:
        _finish(rec, *event.finish)
    count = event.fields.get("completion_tokens")
    if count is None:
        return event.text
    return bool(count > (before or 0))


def _feed_completions(rec: dict[str, Any], obj: dict[str, Any]) -> bool:
    choices = obj.get("choices") or []
    if not isinstance(choices, list):
        raise TypeError(f"choices is {type(choices).__name__}, not a list")
    output = False
    for choice in choices:
        output = output or bool(json_object(choice, "a choice").get("text"))
        reason = json_object(choice, "a choice").get("finish_reason")
        if reason:
            _finish(rec, reason, "finish_reason abort")
    usage = json_object(obj.get("usage"), "usage")
    for key in ("prompt_tokens", "completion_tokens"):
        value = json_number(usage, key)
        if value is not None:
            rec[key] = value
    details = json_object(usage.get("prompt_tokens_details"), "prompt_tokens_details")
    cached = json_number(details, "cached_tokens")
    if cached is not None:
        rec["cached_tokens"] = cached
    return output


async def _request(session: aiohttp.ClientSession, url: str, rec: dict[str, Any], body: bytes,
                   *, api: str, output_len: int, timeout_s: float, deadline: float,
                   t0: float, time_scale: float, flight: _InFlight,
                   engine: Engine | None = None) -> dict[str, Any]:
    """Send one request, read its SSE stream line by line, fill and return ``rec``."""
    loop = asyncio.get_running_loop()
    round_bound = deadline <= loop.time() + timeout_s
    start, end, first = time.perf_counter(), None, None
    rec["send_ts"] = time.time()
    flight.now += 1
    flight.peak = max(flight.peak, flight.now)
    done = False
    try:
        async with asyncio.timeout_at(min(deadline, loop.time() + timeout_s)):
            async with session.post(url, data=body, headers=_JSON) as resp:
                rec["http_status"] = resp.status
                if resp.status != 200:
                    text = await resp.text(errors="replace")
                    raise _Fail(f"http {resp.status}", f"HTTP {resp.status}: {text[:500]}")
                async for line in resp.content:
                    if not line.startswith(b"data:"):
                        continue  # blank separators, SSE comments
                    first = first or time.perf_counter()
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        end, done = time.perf_counter(), True
                        break
                    if _feed(rec, payload, api, engine):
                        rec["chunk_s"].append((time.perf_counter() - start) * time_scale)
                        rec["chunk_tokens"].append(rec["completion_tokens"])
        if not done:
            raise _Fail("truncated stream", "stream ended before data: [DONE]")
        if rec["finish_reason"] is None:
            raise _Fail("truncated stream", "data: [DONE] without a final chunk (finish_reason)")
        wrong = request_problem(output_len, rec["completion_tokens"])
        if wrong:
            raise _Fail(WRONG_OUTPUT, wrong)
        rec["ok"] = True
    except _Fail as exc:
        rec["error_kind"], rec["error"] = exc.kind, str(exc)
    except TimeoutError:
        kind = "round timeout" if round_bound else "timeout"
        rec["error_kind"], rec["error"] = kind, f"{kind} after {time.perf_counter() - start:.3f} s"
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
        cut = rec["http_status"] is not None  # the answer had started: the stream was cut
        rec["error_kind"] = "truncated stream" if cut else "connection error"
        rec["error"] = f"{rec['error_kind']}: {exc!r}"
    except (aiohttp.ClientError, OSError, ValueError) as exc:  # ValueError: oversized line
        rec["error_kind"], rec["error"] = "connection error", f"connection error: {exc!r}"
    finally:
        flight.now -= 1
    end = end or time.perf_counter()
    for name, raw in (("sent_at", start - t0), ("done_at", end - t0), ("e2e", end - start),
                      ("ttft", None if first is None else first - start)):
        rec[f"{name}_raw_s"] = raw
        rec[f"{name}_s"] = None if raw is None else raw * time_scale
    return rec


async def _flush(session: aiohttp.ClientSession, base: str, timeout_s: float,
                 path: str) -> None:
    """POST the engine's cache flush (``path``); 400 means requests are still running, so retry
    with backoff."""
    loop = asyncio.get_running_loop()
    deadline, delay, attempts = loop.time() + timeout_s, 0.05, 0
    while True:
        attempts += 1
        try:
            async with asyncio.timeout_at(deadline), session.post(base + path) as r:
                status, text = r.status, await r.text(errors="replace")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise BenchSetupError(f"POST {path} failed: {exc!r}") from exc
        if status == 200:
            return
        if status != 400 or loop.time() + delay > deadline:
            raise BenchSetupError(
                f"POST {path}: HTTP {status} after {attempts} attempt(s): {text[:300]}")
        await asyncio.sleep(delay)  # backoff while the server drains, not synchronisation
        delay = min(delay * 2, 1.0)


async def _discover_model(session: aiohttp.ClientSession, base: str, timeout_s: float,
                          path: str) -> str:
    """The served model name from the engine's model list (``path``; as bench_serving does
    without --model)."""
    try:
        async with asyncio.timeout(timeout_s), session.get(base + path) as r:
            data = await r.json(content_type=None)
        return str(data["data"][0]["id"])
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError, LookupError, TypeError) as exc:
        raise BenchSetupError(f"GET {path} gave no model name: {exc!r}") from exc


async def _prefix_counters(session: aiohttp.ClientSession, base: str, path: str,
                           engine: Engine, timeout_s: float) -> tuple[float, float] | None:
    """The engine's cumulative (cached, prompt) token counters from its metrics page; None
    when the page does not answer or holds neither (metrics off)."""
    try:
        async with asyncio.timeout(timeout_s), session.get(base + path) as r:
            if r.status != 200:
                return None
            text = await r.text(errors="replace")
    except (aiohttp.ClientError, OSError, TimeoutError):
        return None
    return engine.prefix_counters(text)


def _hit_rate(before: tuple[float, float] | None, after: tuple[float, float] | None,
              records: list[dict[str, Any]]) -> tuple[float | None, str]:
    """A round's achieved prefix hit rate and where it comes from (see the module docstring)."""
    if before is not None and after is not None and after[1] > before[1]:
        return (after[0] - before[0]) / (after[1] - before[1]), "server counters"
    done = [r for r in records if r.get("ok")]
    if done and all(r.get("cached_tokens") is not None and r.get("prompt_tokens") is not None
                    for r in done):
        cached = sum(float(r["cached_tokens"]) for r in done)
        prompt = sum(float(r["prompt_tokens"]) for r in done)
        if prompt:
            return cached / prompt, "per-request cached_tokens"
    return None, "not measured: the server reported no cached tokens"


async def run_round(base_url: str, prompts: PromptSet, concurrency: int, *, spec: WorkloadSpec,
                    model: str | None = None, time_scale: float = 1.0, flush_cache: bool = True,
                    on_record: OnRecord | None = None, session: aiohttp.ClientSession | None = None,
                    flush_timeout_s: float = 30.0,
                    cancel: threading.Event | None = None, warmup: bool = True,
                    engine: Engine | None = None,
                    hits_unmeasured: str | None = None) -> RoundResult:
    """Run one round of ``prompts`` at concurrency C against ``base_url`` (rank 0's URL).

    ``spec`` supplies output_len, api, request rate and timeouts; its prompt fields must match
    ``prompts.spec``. Raises BenchSetupError if /flush_cache or /v1/models fails; request
    failures never raise, they become failed records. ``cancel`` set: RoundCancelled.
    ``warmup=False``: no warm-up requests (a server warmed by an earlier round of this boot).
    ``hits_unmeasured``: why this server's prefix hit rate is not measured (an emulator
    without a prefix cache); the round then says so instead of reading a number.
    """
    if cancel is not None:
        return await _cancellable(  # type: ignore[no-any-return]
            run_round(base_url, prompts, concurrency, spec=spec, model=model,
                      time_scale=time_scale, flush_cache=flush_cache, on_record=on_record,
                      session=session, flush_timeout_s=flush_timeout_s, warmup=warmup,
                      engine=engine, hits_unmeasured=hits_unmeasured), cancel)
    if concurrency < 1 or not time_scale > 0:
        raise ValueError(f"need concurrency >= 1 and time_scale > 0: {concurrency}, {time_scale}")
    if any(getattr(spec, f) != getattr(prompts.spec, f) for f in _PROMPT_FIELDS):
        raise ValueError(f"spec {spec} does not describe the prompt set ({prompts.spec})")
    if session is None:
        async with make_session(concurrency + spec.warmup_requests + 2) as own:
            return await run_round(base_url, prompts, concurrency, spec=spec, model=model,
                                   time_scale=time_scale, flush_cache=flush_cache,
                                   on_record=on_record, session=own,
                                   flush_timeout_s=flush_timeout_s, warmup=warmup,
                                   engine=engine, hits_unmeasured=hits_unmeasured)
    limit = session.connector.limit if session.connector is not None else 0
    if 0 < limit < concurrency:  # a smaller pool would silently cap the concurrency
        raise ValueError(f"session connector limit {limit} < concurrency {concurrency}")
    base = base_url.rstrip("/")
    paths = (engine or engine_of()).endpoints
    url = base + (paths.generate if spec.api == "generate" else paths.completions)
    if spec.api == "completions" and model is None:
        model = await _discover_model(session, base, spec.request_timeout_s, paths.models)
    bodies = prompts.bodies(spec, model, engine=engine)
    warm_bodies = prompts.bodies(spec, model, warmup=True, engine=engine) if warmup else ()
    if flush_cache and paths.flush_cache:  # an engine without a cache flush: none
        await _flush(session, base, flush_timeout_s, paths.flush_cache)
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(concurrency)
    the_engine = engine or engine_of()
    send = functools.partial(_request, session, url, api=spec.api,
                             timeout_s=spec.request_timeout_s, time_scale=time_scale,
                             engine=the_engine)
    asked = [p.output_len or spec.output_len for p in prompts.prompts]

    async def warm(i: int) -> dict[str, Any]:
        async with sem:
            return await send(_new_record(i, prompts.warmup[i].length), warm_bodies[i],
                              output_len=spec.output_len,
                              deadline=loop.time() + spec.round_timeout_s,
                              t0=time.perf_counter(), flight=_InFlight())

    warmed = await asyncio.gather(*(warm(i) for i in range(len(warm_bodies))))
    hits = prompts.implied_hit_rate is not None and hits_unmeasured is None
    before = (await _prefix_counters(session, base, paths.metrics, the_engine,
                                     spec.request_timeout_s) if hits else None)
    flight, records = _InFlight(), []
    t0, start = time.perf_counter(), loop.time()
    deadline = start + spec.round_timeout_s

    async def one(i: int, arrival: float) -> None:
        rec = _new_record(i, prompts.prompts[i].length)
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.sleep(max(0.0, start + arrival - loop.time()))
                issued = time.perf_counter() - t0  # due and reached, before any wait for C
                rec.update(scheduled_at_raw_s=arrival, scheduled_at_s=arrival * time_scale,
                           issued_at_raw_s=issued, issued_at_s=issued * time_scale)
                await sem.acquire()
        except TimeoutError:
            rec.update(error_kind="round timeout", error="round timeout: never sent")
        else:
            try:
                await send(rec, bodies[i], output_len=asked[i], deadline=deadline, t0=t0,
                           flight=flight)
            finally:
                sem.release()
        records.append(rec)
        if on_record is not None:
            on_record(rec)

    if prompts.arrivals is not None and math.isinf(spec.request_rate):
        due = [a / time_scale for a in prompts.arrivals]  # the trace's own timestamps
    else:
        due = schedule(spec.num_requests, spec.request_rate, seed=spec.seed,
                       burstiness=spec.burstiness, time_scale=time_scale,
                       stream=spec.arrival_stream)
    try:
        async with asyncio.TaskGroup() as tg:
            for i, arrival in enumerate(due):
                tg.create_task(one(i, arrival))
    except ExceptionGroup as group:  # only on_record can raise in there: surface its error
        raise group.exceptions[0] from None
    records.sort(key=lambda r: int(r["index"]))
    result = summarize(records, num_requests=len(bodies), peak_concurrency=flight.peak,
                       prompt_digest=prompts.digest, concurrency=concurrency,
                       time_scale=time_scale, warmup_records=warmed,
                       output_len=spec.output_len if all(a == spec.output_len for a in asked)
                       else asked)
    if prompts.implied_hit_rate is None:
        return result
    if hits_unmeasured is not None:
        achieved, source = None, f"not measured: {hits_unmeasured}"
    else:
        after = await _prefix_counters(session, base, paths.metrics, the_engine,
                                       spec.request_timeout_s)
        achieved, source = _hit_rate(before, after, records)
    return dataclasses.replace(result, hit_rate_implied=prompts.implied_hit_rate,
                               hit_rate_achieved=achieved, hit_rate_source=source,
                               hit_rate_tolerance=prompts.hit_tolerance)


def run_round_sync(base_url: str, prompts: PromptSet, concurrency: int, *, spec: WorkloadSpec,
                   model: str | None = None, time_scale: float = 1.0, flush_cache: bool = True,
                   on_record: OnRecord | None = None, flush_timeout_s: float = 30.0,
                   cancel: threading.Event | None = None, warmup: bool = True,
                   engine: Engine | None = None,
                   hits_unmeasured: str | None = None) -> RoundResult:
    """``run_round`` in a fresh event loop with its own session (not from inside a loop)."""
    return asyncio.run(run_round(base_url, prompts, concurrency, spec=spec, model=model,
                                 time_scale=time_scale, flush_cache=flush_cache,
                                 on_record=on_record, flush_timeout_s=flush_timeout_s,
                                 cancel=cancel, warmup=warmup, engine=engine,
                                 hits_unmeasured=hits_unmeasured))
