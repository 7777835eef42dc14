"""``/generate`` and ``/v1/completions`` of rank 0 (contract §1.5, §1.6).

Streaming uses SSE framing ``data: {json}\\n\\n`` ended by ``data: [DONE]\\n\\n``; ``text`` is
cumulative and ``output_ids`` the full list so far (NEW non-incremental mode). Besides SGLang's
``meta_info`` keys every chunk carries ``ppsweep_due_ts``: the real ``time.time()`` at which the
emulated engine produced it, next to ``response_sent_to_client_ts`` (when it was written).

Streamed chunks are written from the scheduler's due-time callback (sim/http/sse.py) and encoded
incrementally (:class:`GenerateChunks`: each token's id and text are serialised once); the
``response_sent_to_client_ts`` stamp is taken last, right before the bytes go to the socket.

A non-streamed request with ``return_logprob`` answers as greedy decoding of one model does:
its tokens come from the prompt (sim/model/greedy.py), not from the request id, so every layout
gives the same ones (with a layout-dependent logprob jitter of at most 0.003 nats; the
``corrupt_stage`` fault changes them). ``meta_info`` then carries SGLang 0.5.23's
``input_token_logprobs`` (empty: ``logprob_start_len`` -1), ``output_token_logprobs``
(``[logprob, token_id, null]`` per token) and, with ``top_logprobs_num`` > 0,
``output_top_logprobs`` (per position a list of ``[logprob, token_id, null]``, best first;
tokenizer_manager.py ``add_logprob_to_meta_info``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..model import greedy
from ..model.engine import Job, count_text_tokens, token_text
from .jsonfast import dumps, loads_request
from .sse import DirectSink, aborting, install, newest, prepare_stream
from .state import ServerState

# SamplingParams of SGLang 0.5.23's JSON contract (sglang/api/v1/api_types.py), in its order:
# the order of the list in the 400 message for an unknown key.
SAMPLING_FIELDS = (
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k",
    "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
    "n", "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim", "stream_interval", "logit_bias",
    "sampling_seed", "custom_params", "beam_width", "watermark", "choice",
)  # fmt: skip
SAMPLING_KEYS = frozenset(SAMPLING_FIELDS)
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
DONE = b"data: [DONE]\n\n"


class BadRequest(Exception):
    """A request error with its JSON body.

    ``message`` is set for the errors SGLang raises as a ``ValueError`` inside the tokenizer
    manager (prompt checks): a streamed request gets those inside a 200 event stream
    (:func:`stream_error`), not as an HTTP 400 (the schema gate's errors stay 400).
    """

    def __init__(self, body: Any, status: int = 400, message: str | None = None) -> None:
        super().__init__(str(body))
        self.body = body
        self.status = status
        self.message = message


def value_error(message: str) -> BadRequest:
    """SGLang's ``ValueError`` answer: 400 ``{"error": {"message": ...}}`` when not streamed."""
    return BadRequest({"error": {"message": message}}, message=message)


def invalid_type(value: Any, expected: str) -> str:
    """serde's ``invalid_type`` text (the schema gate's 400 body for a wrongly typed value)."""
    if isinstance(value, bool):
        shown = f"boolean `{str(value).lower()}`"
    elif isinstance(value, int):
        shown = f"integer `{value}`"
    elif isinstance(value, float):
        shown = f"floating point `{value}`"
    elif isinstance(value, str):
        shown = f'string "{value}"'
    elif isinstance(value, list):
        shown = "sequence"
    else:
        shown = "map" if isinstance(value, dict) else "null"
    return f"invalid type: {shown}, expected {expected}"


def unknown_field(key: str, fields: tuple[str, ...]) -> str:
    """serde's ``unknown_field`` text, the schema gate's 400 body (SGLang 0.5.23)."""
    listed = ", ".join(f"`{f}`" for f in fields)
    return f"unknown field `{key}`, expected one of {listed}"


def json_response(body: Any, status: int = 200) -> web.Response:
    """ORJSONResponse equivalent."""
    return web.Response(body=dumps(body), status=status, content_type="application/json")


def error_message(message: str, code: int = 400) -> dict[str, Any]:
    """NEW's error object."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "code": code,
            "retryable": False,
        }
    }


async def read_json(request: web.Request, state: ServerState) -> Any:
    """Read and parse a body through the intake gate.

    The gate admits one request's parsing per event-loop iteration (the ``sleep(0)`` hands the
    loop back first), so a burst of 64 large bodies cannot delay a due token by more than one
    parse: asyncio only checks its timers between iterations. It also holds the parse (and the
    request's submission and stream opening that follow in the same loop step) back while an
    output is due within the next ~1.6 ms (``RealtimeDriver.clear_of_outputs``).
    """
    raw = await request.read()
    async with state.intake:
        await asyncio.sleep(0)
        if state.engine is not None:
            await state.engine.driver.clear_of_outputs()
        try:
            return loads_request(raw)
        except ValueError as exc:
            raise BadRequest(error_message(f"Invalid JSON body: {exc}")) from exc


def check_prompt(state: ServerState, n_tokens: int, max_new: int) -> None:
    """The tokenizer manager's length checks (ValueError), then the KV-capacity check."""
    ctx = state.cfg.mem.context_length
    if n_tokens >= ctx:
        raise value_error(
            f"The input ({n_tokens} tokens) is longer than the model's context length "
            f"({ctx} tokens)."
        )
    if n_tokens + max_new > ctx:
        raise value_error(
            f"Requested token count exceeds the model's maximum context length of {ctx} "
            f"tokens. You requested a total of {n_tokens + max_new} tokens: {n_tokens} tokens "
            f"from the input messages and {max_new} tokens for the completion. Please reduce "
            "the number of tokens in the input messages or the completion to fit within the "
            "limit."
        )
    cap = state.cfg.mem.max_total_num_tokens
    if n_tokens + max_new > cap:
        raise value_error(
            f"Requested token count exceeds the KV cache capacity: {n_tokens} input + "
            f"{max_new} output > {cap} tokens."
        )


def meta_info(
    state: ServerState, job: Job, due: float, *, final: bool, stamp: bool = True
) -> dict[str, Any]:
    """``meta_info`` of one output chunk (``stamp=False``: without the sent time, added last)."""
    req = job.req
    done = len(job.ids)
    finish: Any = {"type": "length", "length": job.requested_new} if final else None
    meta: dict[str, Any] = {
        "id": req.rid,
        "finish_reason": finish,
        "prompt_tokens": req.prompt_tokens,
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": min(done, job.requested_new),
        "cached_tokens": 0,
    }
    if final:
        meta["weight_versions"] = [
            {"version": "default", "start": 0, "end": meta["completion_tokens"]}
        ]
    meta["cached_tokens_details"] = None
    meta["dp_rank"] = None
    if final:
        meta["e2e_latency"] = (req.finish_time or due) - req.created
    if state.cfg.args.enable_metrics:
        meta["request_received_ts"] = job.received_wall
        if req.first_token_time is not None:
            meta["first_token_latency"] = req.first_token_time - req.created
    meta["ppsweep_due_ts"] = state.tb.wall_at(due)
    if stamp:
        meta["response_sent_to_client_ts"] = time.time()
    return meta


class GenerateChunks:
    """Encoder of a ``/generate`` stream's SSE chunks.

    ``text`` and ``output_ids`` are cumulative, so each token's JSON is produced once and the
    chunk is assembled from the growing byte buffers; only the small ``meta_info`` is serialised
    per chunk. ``response_sent_to_client_ts`` is stamped as the very last step.
    """

    def __init__(self, state: ServerState, job: Job) -> None:
        self.state = state
        self.job = job
        self.final_sent = False
        self._text = bytearray()
        self._text_chars = 0
        self._ids = bytearray()
        self._n_ids = 0

    def _catch_up(self) -> None:
        job = self.job
        if len(job.ids) > self._n_ids:
            new = b",".join(b"%d" % tid for tid in job.ids[self._n_ids :])
            self._ids += new if not self._n_ids else b"," + new
            self._n_ids = len(job.ids)
        if len(job.text) > self._text_chars:
            self._text += dumps(job.text[self._text_chars :])[1:-1]
            self._text_chars = len(job.text)

    def encode(self, due: float) -> bytes:
        """The SSE event(s) of the output due at ``due`` (plus ``[DONE]`` after the final one)."""
        self._catch_up()
        final = self.job.req.finished
        meta = dumps(meta_info(self.state, self.job, due, final=final, stamp=False))
        self.final_sent = final
        # the stamp goes last: these bytes are handed to the socket right after this returns
        return b"".join(
            (
                b'data: {"text":"',
                self._text,
                b'","output_ids":[',
                self._ids,
                b'],"meta_info":',
                meta[:-1],
                b',"response_sent_to_client_ts":%r}}\n\n' % time.time(),
                DONE if final else b"",
            )
        )


async def stream_error(request: web.Request, message: str) -> web.StreamResponse:
    """A ``ValueError`` of a streamed ``/generate``: HTTP 200, one error event, ``[DONE]``."""
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    await resp.write(b"data: " + dumps(error_message(message)) + b"\n\n" + DONE)
    await resp.write_eof()
    return resp


def parse_generate(
    body: Any,
) -> tuple[int | None, str | None, list[int] | range | None, dict[str, Any]]:
    """Validate a ``/generate`` body: (prompt kind marker, text, ids, sampling_params)."""
    if not isinstance(body, dict):
        raise BadRequest({"error": invalid_type(body, "struct GenerateRequest")})
    params = body.get("sampling_params") or {}
    if isinstance(params, list):
        params = params[0] if params else {}
    if not isinstance(params, dict):
        raise BadRequest({"error": invalid_type(params, "struct SamplingParams")})
    unknown = [k for k in params if k not in SAMPLING_KEYS]  # serde reports the first one
    if unknown:
        raise BadRequest({"error": unknown_field(unknown[0], SAMPLING_FIELDS)})
    given = [k for k in ("text", "input_ids", "input_embeds") if body.get(k) is not None]
    if len(given) != 1:
        raise value_error("Either text, input_ids or input_embeds should be provided.")
    text = body.get("text")
    ids = body.get("input_ids")
    if given[0] == "input_embeds":
        raise value_error("input_embeds is not supported by the emulator.")
    if isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list)):
        raise value_error("Batch requests are not supported by the emulator.")
    return (
        None,
        text if isinstance(text, str) else None,
        ids if isinstance(ids, list | range) else None,
        params,
    )


@dataclass(frozen=True)
class Admitted:
    """A ``/generate`` request past the checks: its body, prompt and fault draw."""

    body: dict[str, Any]
    text: str | None
    ids: list[int] | range | None
    n_prompt: int
    max_new: int
    rid: str
    received: float
    failure: str | None

    @property
    def stream(self) -> bool:
        """Whether the client asked for an event stream."""
        return bool(self.body.get("stream"))


async def admit_generate(
    request: web.Request, state: ServerState
) -> Admitted | web.StreamResponse:
    """Read and check a ``/generate`` body and draw its fault; the error answer instead when
    it is refused (or fails by the ``fail_requests`` fault before it starts)."""
    received = time.time()
    body: Any = None
    try:
        body = await read_json(request, state)
        _, text, ids, params = parse_generate(body)
        n_prompt = len(ids) if ids is not None else count_text_tokens(text or "")
        max_new = int(params.get("max_new_tokens", 128))
        check_prompt(state, n_prompt, max_new)
    except BadRequest as exc:
        state.log.line(f"[http_server] Error: {exc.message or exc.body}")
        if exc.message is not None and isinstance(body, dict) and body.get("stream"):
            return await stream_error(request, exc.message)
        return json_response(exc.body, exc.status)
    engine = state.engine
    assert engine is not None
    failure = engine.draw_failure()
    if failure == "http" or (failure == "stream" and not body.get("stream")):
        msg = "Internal server error: the engine failed while processing the request."
        state.log.line(f"[http_server] Error: {msg}")
        return json_response(error_message(msg, 500), 500)
    rid = str(body.get("rid") or uuid.uuid4().hex)
    return Admitted(body, text, ids, n_prompt, max_new, rid, received, failure)


def start_job(state: ServerState, adm: Admitted, *, max_new: int | None = None,
              prefilled: bool = False) -> Job:
    """Submit an admitted request to the engine (``max_new``: a role's own token count;
    ``prefilled``: its KV arrived from a prefill server, sim/model/engine.py)."""
    engine = state.engine
    assert engine is not None
    job = engine.start(
        adm.rid,
        adm.n_prompt,
        adm.max_new if max_new is None else max_new,
        adm.received,
        log_metrics=adm.body.get("log_metrics", True) is not False,
        stream=adm.stream,
        prefilled=prefilled,
    )
    job.fail_in_stream = adm.failure == "stream"
    return job


async def finished(state: ServerState, job: Job) -> None:
    """Wait until ``job`` produced its last token (aborting it if the handler is cancelled)."""
    try:
        while not job.req.finished:
            await job.outputs.get()
    except BaseException:
        assert state.engine is not None
        state.engine.abort(job)
        raise


async def respond(request: web.Request, state: ServerState, adm: Admitted,
                  job: Job) -> web.StreamResponse:
    """Answer a started job: its event stream, or the whole answer once it finished."""
    if adm.stream:
        return await _stream_generate(request, state, job)
    await finished(state, job)
    due = job.req.finish_time or 0.0
    meta = meta_info(state, job, due, final=True)
    if adm.body.get("return_logprob"):
        return json_response(greedy_answer(state, adm.body, adm.text, adm.ids, len(job.ids), meta))
    return json_response({"text": job.text, "output_ids": job.ids, "meta_info": meta})


async def handle_generate(request: web.Request) -> web.StreamResponse:
    """POST/PUT ``/generate`` of a server that is not P/D disaggregated."""
    state: ServerState = request.app["state"]
    adm = await admit_generate(request, state)
    if isinstance(adm, web.StreamResponse):
        return adm
    return await respond(request, state, adm, start_job(state, adm))


def greedy_tokens(
    state: ServerState, text: str | None, ids: list[int] | range | None, n: int, top_k: int
) -> list[tuple[int, float, list[tuple[float, int]]]]:
    """The layout's greedy positions of a prompt (sim/model/greedy.py), the ``corrupt_stage``
    fault applied when the layout has that stage."""
    cfg = state.cfg
    layout = cfg.layout
    fault = cfg.settings.faults.get("corrupt_stage")
    stage = int(fault.number()) if fault is not None else None
    vocab = state.engine.vocab if state.engine is not None else cfg.profile.model.vocab_size
    return greedy.generate(
        greedy.prompt_seed(text, ids), n, vocab, top_k,
        jitter=greedy.layout_jitter(layout.pp, layout.tp, layout.ep),
        corrupt=stage if stage is not None and stage < layout.pp else None,
    )


def greedy_text(state: ServerState, text: str | None, ids: list[int] | range | None, n: int,
                stop: list[str]) -> str:
    """The greedy completion of a prompt as text (a ``temperature`` 0 ``/v1/completions``: the
    accuracy check's answers), cut before the first ``stop`` string as SGLang does."""
    out = "".join(token_text(tid) for tid, _, _ in greedy_tokens(state, text, ids, n, 1))
    cuts = [i for i in (out.find(s) for s in stop if s) if i >= 0]
    return out[:min(cuts)] if cuts else out


def greedy_answer(
    state: ServerState,
    body: dict[str, Any],
    text: str | None,
    ids: list[int] | range | None,
    n: int,
    meta: dict[str, Any],
) -> dict[str, Any]:
    """The answer of a ``return_logprob`` request: the prompt's greedy tokens and logprobs
    (sim/model/greedy.py; the module docstring says the shapes)."""
    top_k = int(body.get("top_logprobs_num") or 0)
    out = greedy_tokens(state, text, ids, n, max(top_k, 1))
    tokens = [tid for tid, _, _ in out]
    meta["input_token_logprobs"] = []
    meta["output_token_logprobs"] = [[lp, tid, None] for tid, lp, _ in out]
    meta["output_token_logprobs_length"] = len(out)
    if top_k > 0:
        meta["input_top_logprobs"] = []
        meta["output_top_logprobs"] = [[[v, t, None] for v, t in top] for _, _, top in out]
    return {
        "text": "".join(token_text(t) for t in tokens),
        "output_ids": tokens,
        "meta_info": meta,
    }



async def _stream_generate(
    request: web.Request, state: ServerState, job: Job
) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    engine = state.engine
    assert engine is not None
    chunks = GenerateChunks(state, job)
    with aborting(job, engine, state.log):
        transport = await prepare_stream(request, resp)
        sink = None
        if transport is not None and not job.fail_in_stream:
            sink = DirectSink(transport, chunks.encode)
        while True:
            if sink is not None:
                install(job, sink)
            due = newest(job, await job.outputs.get())
            if due is None:
                break  # the sink wrote every chunk, the final one included
            if job.fail_in_stream:
                err = error_message(
                    "Internal server error: the engine failed while generating.", 500
                )
                state.log.line(f"[http_server] Error: {err['error']['message']}")
                await resp.write(b"data: " + dumps(err) + b"\n\n" + DONE)
                engine.abort(job)
                break
            await resp.write(chunks.encode(due))
            if chunks.final_sent:
                break
    return resp
