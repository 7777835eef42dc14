"""The P/D roles of one emulated server on its own: the flags in /server_info, the fake
transfer, the decode's bounded wait for KV that never comes, the prefill's refusal of ``fake``."""

from __future__ import annotations

import json

from support.sim import ClusterFactory, http, run_sim, sse_events

BODY = {"input_ids": list(range(64)), "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}


def test_decode_with_fake_backend_serves_at_once(cluster: ClusterFactory) -> None:
    c = cluster(1, ["--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "fake"])
    c.wait_healthy(30)
    info = json.loads(http("GET", c.base_url + "/server_info")[1])
    assert info["disaggregation_mode"] == "decode"
    assert info["disaggregation_transfer_backend"] == "fake"
    assert info["disaggregation_bootstrap_port"] == 8998
    assert info["disable_radix_cache"] is True
    assert info["ppsweep_sim"]["outputs_meaningful"] is False
    assert json.loads(http("GET", c.base_url + "/model_info")[1])["disaggregation_mode"] == "decode"
    # a bootstrap peer that does not exist is not contacted: fake moves no KV
    body = {**BODY, "bootstrap_host": "127.0.0.1", "bootstrap_port": 9, "bootstrap_room": 5}
    status, raw, _ = http("POST", c.base_url + "/generate", body)
    assert status == 200 and len(json.loads(raw)["output_ids"]) == 4


def test_decode_gives_up_after_the_waiting_timeout(cluster: ClusterFactory) -> None:
    # 20 emulated s at 2000x: the decode aborts after 10 ms of polling a listener that is absent
    c = cluster(1, ["--disaggregation-mode", "decode"],
                env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "20"})
    c.wait_healthy(30)
    info = json.loads(http("GET", c.base_url + "/server_info")[1])
    assert info["ppsweep_sim"]["outputs_meaningful"] is True
    # the warmup's fake host: no peer, served at once
    fake = {**BODY, "bootstrap_host": "2.2.2.2", "bootstrap_port": 8998, "bootstrap_room": 0}
    assert http("POST", c.base_url + "/generate", fake)[0] == 200
    body = {**BODY, "bootstrap_host": "127.0.0.1", "bootstrap_port": 9, "bootstrap_room": 42}
    status, raw, _ = http("POST", c.base_url + "/generate", body)
    assert status == 500
    message = json.loads(raw)["error"]["message"]
    assert "Decode transfer failed" in message and "bootstrap_room=42" in message
    assert "timed out after 20.0s in KVPoll.WaitingForInput" in message
    status, raw, _ = http("POST", c.base_url + "/generate", {**body, "stream": True})
    events = sse_events(raw)
    assert status == 200 and events[-1] == "[DONE]"
    assert "Decode transfer failed" in json.loads(events[0])["error"]["message"]


def test_prefill_refuses_the_fake_backend() -> None:
    done = run_sim(["--model-path", "/models/tiny", "--disaggregation-mode", "prefill",
                    "--disaggregation-transfer-backend", "fake"])
    assert done.returncode == 1
    assert "AssertionError: Prefill server does not support 'fake' as the transfer backend" in (
        done.stderr
    )


def test_unknown_mode_is_refused_like_argparse() -> None:
    done = run_sim(["--model-path", "/models/tiny", "--disaggregation-mode", "both"])
    assert done.returncode == 2 and "invalid choice: 'both'" in done.stderr
