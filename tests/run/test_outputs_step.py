"""The outputs probe (run/outputs_step.py) against a stand-in /generate: SGLang's body, once per
boot (a point that joins the boot gets a copy), a refused prompt named in the file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from support.httpthread import serving

from pytest_ppsweep.matrix.correctnessspec import CorrectnessSpec
from pytest_ppsweep.results.outputs import read_outputs
from pytest_ppsweep.run.outputs_step import OutputsStep


class _Generate(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(body)
        if body.get("text") == "refused":
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "no"}}')
            return
        n = body["sampling_params"]["max_new_tokens"]
        answer = {"output_ids": list(range(n)), "meta_info": {
            "output_token_logprobs": [[-0.5, t, None] for t in range(n)],
            "output_top_logprobs": [[[-0.5, t, None], [-2.0, t + 1, None]] for t in range(n)]}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Generate.bodies = []
    with serving(_Generate) as url:
        yield url


def _booted(service: Any, cid: str) -> Any:
    return SimpleNamespace(service=service, config=SimpleNamespace(id=cid, engine="sglang"),
                           boot_id=service.config.id, check_alive=lambda: None)


def test_once_per_boot_and_a_copy_for_a_joining_point(server: str, tmp_path: Path) -> None:
    spec = CorrectnessSpec(prompts=("a b", (1, 2), "refused"), max_new_tokens=3, top_logprobs=2)
    sweep: Any = SimpleNamespace(correctness=spec)
    store: Any = SimpleNamespace(dir=tmp_path)
    lines: list[str] = []
    ctx: Any = SimpleNamespace(sweep=sweep, store=store, progress=lines.append)
    step = OutputsStep(ctx)
    service = SimpleNamespace(target_url=server, config=SimpleNamespace(id="pp2", engine="sglang"))
    step.probe(_booted(service, "pp2"))
    step.probe(_booted(service, "pp2#decode"))  # same boot: no new request
    assert len(_Generate.bodies) == 3 and len(lines) == 1 and "1 failed" in lines[0]
    first = _Generate.bodies[0] if "text" in _Generate.bodies[0] else _Generate.bodies[1]
    assert first["sampling_params"] == {"temperature": 0.0, "max_new_tokens": 3,
                                        "ignore_eos": True}
    assert first["return_logprob"] is True and first["top_logprobs_num"] == 2
    assert any(b.get("input_ids") == [1, 2] for b in _Generate.bodies)
    for cid in ("pp2", "pp2#decode"):
        stored = read_outputs(tmp_path, cid)
        assert stored is not None and stored.config_id == cid and stored.boot_of == "pp2"
        assert stored.prompts[0].ids == (0, 1, 2) and stored.prompts[1].prompt == (1, 2)
        assert stored.prompts[2].error.startswith("/generate answered HTTP 400")
