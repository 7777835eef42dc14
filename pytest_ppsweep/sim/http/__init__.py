"""Layer 3 of the emulator, HTTP: rank 0's SGLang API on aiohttp, and a follower's dummy server.

The application and its routes (api_app), ``/generate`` and the OpenAI ``/v1/completions``
(api_generate, api_openai), ``/server_info``, ``/model_info`` and ``/v1/models`` (api_info),
streaming of chunks straight from the scheduler's callback (sse), fast JSON (jsonfast) and the
state one server holds (state). It builds on ``model`` and ``launch``; it runs no process.

Layers: ``model`` → ``launch`` → ``http`` → ``rank``; each imports only the layers before it
(tests/test_layering_sim.py checks this).
"""

from __future__ import annotations

from .api_app import build_dummy_app, build_rank0_app
from .api_generate import BadRequest, handle_generate, json_response
from .api_info import DECODE_GRAPH_BS, model_info, models_list, server_info
from .api_openai import handle_completions
from .jsonfast import dumps, loads, loads_request
from .sse import DirectSink, aborting, install, prepare_stream
from .state import ServerState

__all__ = [
    "DECODE_GRAPH_BS",
    "BadRequest",
    "DirectSink",
    "ServerState",
    "aborting",
    "build_dummy_app",
    "build_rank0_app",
    "dumps",
    "handle_completions",
    "handle_generate",
    "install",
    "json_response",
    "loads",
    "loads_request",
    "model_info",
    "models_list",
    "prepare_stream",
    "server_info",
]
