"""SGLang's profile window over HTTP: ``/start_profile`` with a ``ProfileReq`` body, then
``/stop_profile``.

The body is SGLang 0.5.23's ``ProfileReq`` (sglang/srt/managers/io_struct.py): ``output_dir``,
``activities``, ``profile_prefix``, ``num_steps`` and ``profile_id``. With ``num_steps`` each
rank stops its profiler by itself after that many forward steps and writes its trace
(profiler_manager.py ``_profile_batch_predicate``); ``/stop_profile`` then fails with
"Profiling is not in progress" (an HTTP 500: the tokenizer raises RuntimeError), which here
means the window already ended. When the round had fewer steps, ``/stop_profile`` ends it.
"""

from __future__ import annotations

from typing import Any

import requests

from pytest_ppsweep.matrix.model import ProfileSpec

from .collect import ProfileError

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 600.0  # the ranks export their traces before /stop_profile answers


def request_body(
    spec: ProfileSpec, output_dir: str, prefix: str, profile_id: str
) -> dict[str, Any]:
    """The ProfileReq of one window."""
    return {
        "output_dir": output_dir,
        "activities": list(spec.activities),
        "profile_prefix": prefix,
        "profile_id": profile_id,
        "num_steps": spec.num_steps,
        # Neither is needed for the attribution; SGLang defaults both on, which makes every
        # trace several times larger (a python_function event per Python call).
        "with_stack": False,
        "record_shapes": False,
    }


def start(base_url: str, body: dict[str, Any], config_id: str) -> None:
    """POST /start_profile; a refusal is a :class:`ProfileError` with the server's answer."""
    try:
        resp = requests.post(f"{base_url}/start_profile", json=body, timeout=START_TIMEOUT_S)
    except requests.RequestException as exc:
        raise ProfileError(f"{config_id}: /start_profile failed: {exc}") from None
    if resp.status_code != 200:
        raise ProfileError(
            f"{config_id}: /start_profile answered HTTP {resp.status_code}: {resp.text[:300]}"
        )


def stop(base_url: str, config_id: str) -> bool:
    """POST /stop_profile: True when it stopped the window, False when the window had ended
    by itself (num_steps reached: SGLang answers 500 "not in progress")."""
    try:
        resp = requests.post(f"{base_url}/stop_profile", timeout=STOP_TIMEOUT_S)
    except requests.RequestException as exc:
        raise ProfileError(f"{config_id}: /stop_profile failed: {exc}") from None
    if resp.status_code == 200:
        return True
    if resp.status_code == 500:
        return False
    raise ProfileError(
        f"{config_id}: /stop_profile answered HTTP {resp.status_code}: {resp.text[:300]}"
    )
