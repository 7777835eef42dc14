"""The engine's profile window over HTTP: its start with the engine's profile request, then its
stop (the paths and the body are the engine's: engine/).

For SGLang the body is 0.5.23's ``ProfileReq`` (sglang/srt/managers/io_struct.py): ``output_dir``,
``activities``, ``profile_prefix``, ``num_steps`` and ``profile_id``. With ``num_steps`` each
rank stops its profiler by itself after that many forward steps and writes its trace
(profiler_manager.py ``_profile_batch_predicate``); ``/stop_profile`` then fails with
"Profiling is not in progress" (an HTTP 500: the tokenizer raises RuntimeError), which here
means the window already ended. When the round had fewer steps, ``/stop_profile`` ends it.
"""

from __future__ import annotations

from typing import Any

import requests

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.matrix.model import ProfileSpec

from .collect import ProfileError

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 600.0  # the ranks export their traces before /stop_profile answers


def request_body(
    spec: ProfileSpec, output_dir: str, prefix: str, profile_id: str,
    engine: Engine | None = None,
) -> dict[str, Any]:
    """The profile request of one window, in the engine's words."""
    return (engine or engine_of()).profile_request(
        output_dir=output_dir, activities=list(spec.activities), prefix=prefix,
        profile_id=profile_id, num_steps=spec.num_steps)


def start(base_url: str, body: dict[str, Any], config_id: str,
          engine: Engine | None = None) -> None:
    """POST the engine's profile start; a refusal is a :class:`ProfileError` with the server's
    answer."""
    path = (engine or engine_of()).endpoints.start_profile
    try:
        resp = requests.post(f"{base_url}{path}", json=body, timeout=START_TIMEOUT_S)
    except requests.RequestException as exc:
        raise ProfileError(f"{config_id}: {path} failed: {exc}") from None
    if resp.status_code != 200:
        raise ProfileError(
            f"{config_id}: {path} answered HTTP {resp.status_code}: {resp.text[:300]}"
        )


def stop(base_url: str, config_id: str, engine: Engine | None = None) -> bool:
    """POST the engine's profile stop: True when it stopped the window, False when the window
    had ended by itself (num_steps reached: SGLang answers 500 "not in progress")."""
    path = (engine or engine_of()).endpoints.stop_profile
    try:
        resp = requests.post(f"{base_url}{path}", timeout=STOP_TIMEOUT_S)
    except requests.RequestException as exc:
        raise ProfileError(f"{config_id}: {path} failed: {exc}") from None
    if resp.status_code == 200:
        return True
    if resp.status_code == 500:
        return False
    raise ProfileError(
        f"{config_id}: {path} answered HTTP {resp.status_code}: {resp.text[:300]}"
    )
