"""OpenAI-compatible ``/v1/completions`` on rank 0 (contract §1.6).

Streamed chunks are written from the scheduler's due-time callback like ``/generate``'s
(sim/http/sse.py); :class:`CompletionChunks` encodes them.

A non-streamed request with ``temperature`` 0 answers as greedy decoding of one model does: its
text is the prompt's greedy tokens (sim/model/greedy.py through api_generate.greedy_text), the
same on every layout and cut before the first ``stop`` string, so a task file can be scored on
the emulator; the ``corrupt_stage`` fault changes it (a corrupted stage drops the accuracy).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiohttp import web

from ..model.engine import Job, count_text_tokens
from .api_generate import (
    DONE,
    SSE_HEADERS,
    BadRequest,
    check_prompt,
    greedy_text,
    json_response,
    read_json,
)
from .jsonfast import dumps
from .sse import DirectSink, aborting, install, newest, prepare_stream
from .state import ServerState


def openai_error(message: str, code: int = 400) -> dict[str, Any]:
    """OpenAI-style error body."""
    kind = "BadRequestError" if code == 400 else "InternalServerError"
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


def _prompt_tokens(prompt: Any) -> int:
    if isinstance(prompt, str):
        return count_text_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(x, int) for x in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return _prompt_tokens(prompt[0])
    raise BadRequest(
        openai_error("prompt must be a string, a list of token ids, or a one-element list.")
    )


def _usage(job: Job) -> dict[str, Any]:
    """SGLang's ``UsageInfo`` (field order kept); the stream's usage chunk drops the nulls."""
    done = min(len(job.ids), job.requested_new)
    return {
        "prompt_tokens": job.req.prompt_tokens,
        "total_tokens": job.req.prompt_tokens + done,
        "completion_tokens": done,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }


def _metadata(job: Job) -> dict[str, Any]:
    done = min(len(job.ids), job.requested_new)
    return {
        "weight_version": "default",
        "weight_versions": [{"version": "default", "start": 0, "end": done}],
    }


def _prompt_text(prompt: Any) -> tuple[str | None, list[int] | None]:
    if isinstance(prompt, list) and len(prompt) == 1 and not isinstance(prompt[0], int):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt, None
    return None, [int(x) for x in prompt]


def _text(state: ServerState, body: dict[str, Any], job: Job) -> str:
    """A non-streamed completion's text: with ``temperature`` 0, the prompt's greedy answer (the
    same on every layout, sim/model/greedy.py; ``corrupt_stage`` changes it), else the job's."""
    temperature = body.get("temperature")
    if not isinstance(temperature, (int, float)) or temperature != 0:
        return job.text
    stop = body.get("stop") or []
    stops = [stop] if isinstance(stop, str) else [str(s) for s in stop]
    text, ids = _prompt_text(body["prompt"])
    return greedy_text(state, text, ids, min(len(job.ids), job.requested_new), stops)


async def handle_completions(request: web.Request) -> web.StreamResponse:
    """POST ``/v1/completions``."""
    state: ServerState = request.app["state"]
    received = time.time()
    try:
        if "application/json" not in request.headers.get("Content-Type", ""):
            raise BadRequest(
                openai_error("Unsupported Media Type: Only 'application/json' is allowed")
            )
        body = await read_json(request, state)
        if not isinstance(body, dict) or "prompt" not in body:
            raise BadRequest(openai_error("Field required: prompt"))
        n_prompt = _prompt_tokens(body["prompt"])
        max_tokens = int(body.get("max_tokens", 16))
        if max_tokens <= 0:
            raise BadRequest(openai_error("max_tokens must be positive"))
        check_prompt(state, n_prompt, max_tokens)
    except BadRequest as exc:  # the prompt checks' ValueErrors as OpenAI errors, streamed or not
        err = openai_error(exc.message) if exc.message is not None else exc.body
        return json_response(err, exc.status)
    engine = state.engine
    assert engine is not None
    rid = str(body.get("rid") or uuid.uuid4().hex)
    model = body.get("model") or state.cfg.served_model_name
    job = engine.start(rid, n_prompt, max_tokens, received, stream=bool(body.get("stream")))
    created = int(received)
    if not body.get("stream"):
        try:
            while not job.req.finished:
                await job.outputs.get()
        except BaseException:
            engine.abort(job)
            raise
        return json_response(
            {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "text": _text(state, body, job),
                        "logprobs": None,
                        "finish_reason": "length",
                        "matched_stop": None,
                    }
                ],
                "usage": _usage(job),
                "metadata": _metadata(job),
            }
        )
    chunks = CompletionChunks(
        job,
        rid=rid,
        created=created,
        model=model,
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
    )
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    with aborting(job, engine, state.log):
        transport = await prepare_stream(request, resp)
        sink = DirectSink(transport, chunks.encode) if transport is not None else None
        while True:
            if sink is not None:
                install(job, sink)
            due = newest(job, await job.outputs.get())
            if due is None:
                break  # the sink wrote every chunk, the final one included
            await resp.write(chunks.encode(due))
            if chunks.final_sent:
                break
    return resp


class CompletionChunks:
    """Encoder of a streamed completion: one ``text_completion`` event per output (the delta)."""

    def __init__(
        self, job: Job, *, rid: str, created: int, model: Any, include_usage: bool
    ) -> None:
        self.job = job
        self.rid = rid
        self.created = created
        self.model = model
        self.include_usage = include_usage
        self.final_sent = False
        self._sent = 0

    def encode(self, due: float) -> bytes:
        """The SSE event(s) of the next output (usage and ``[DONE]`` after the final one)."""
        job = self.job
        final = job.req.finished
        delta, self._sent = job.text[self._sent :], len(job.text)
        chunk = {
            "id": self.rid,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "text": delta,
                    "logprobs": None,
                    "finish_reason": "length" if final else None,
                    "matched_stop": None,
                }
            ],
            "usage": None,
        }
        out = b"data: " + dumps(chunk) + b"\n\n"
        if final and self.include_usage:
            usage_chunk: dict[str, Any] = {
                "id": self.rid,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": {k: v for k, v in _usage(job).items() if v is not None},
            }
            out += b"data: " + dumps(usage_chunk) + b"\n\n"
        self.final_sent = final
        return out + (DONE if final else b"")
