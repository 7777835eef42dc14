"""Parsers and scanners against real captured artifacts (H200 nvidia-smi, SGLang 0.5.23 logs
and server info)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from support.httpthread import serving

from pytest_ppsweep.cluster.gpus import SmiParseError, parse_query_gpu
from pytest_ppsweep.measure.gpu import not_released, worst_rank
from pytest_ppsweep.redact import REDACTED, redact
from pytest_ppsweep.service.logscan import LogFollower, LogScanner
from pytest_ppsweep.service.probe import server_info, topology


def test_query_gpu_with_header_and_units(data_dir: Path) -> None:
    busy = parse_query_gpu((data_dir / "query_gpu_busy.csv").read_text(), "h200")
    idle = parse_query_gpu((data_dir / "query_gpu_idle.csv").read_text(), "h200")
    assert [(g.index, g.name, g.used_mib, g.total_mib) for g in busy] == [
        (0, "NVIDIA H200", 21099, 143771)
    ]
    assert idle[0].used_mib == 0
    assert busy[0].headroom_mib == 143771 - 21099
    assert not_released(idle, busy) == ["h200 GPU 0: 21099 MiB after cleanup vs 0 MiB before"]
    assert not_released(busy, idle) == []


def test_query_gpu_noheader_nounits() -> None:
    text = "0, NVIDIA H200, 21099, 143771\n1, NVIDIA H200, 512, 143771\n"
    gpus = parse_query_gpu(text, "n0")
    assert [g.used_mib for g in gpus] == [21099, 512]
    worst = worst_rank(gpus + parse_query_gpu("0, X, 30000, 143771\n", "n1"))
    assert worst is not None and (worst.node, worst.index, worst.used_mib) == ("n1", 0, 30000)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "printed nothing"),
        ("0, NVIDIA H200, lots, 143771\n", "expected a MiB value"),
        ("0, NVIDIA H200, 12\n", "expected 4 columns"),
        ("No devices were found\n", "expected 4 columns"),
    ],
)
def test_query_gpu_garbage(text: str, match: str) -> None:
    with pytest.raises(SmiParseError, match=match):
        parse_query_gpu(text, "n0")


@pytest.mark.parametrize("name", ["n2-pp2.node0.log", "n2-pp2.node1.log", "n4-pp2tp2.node0.log"])
def test_successful_real_boots_are_clean(data_dir: Path, name: str) -> None:
    # Up to the shutdown: the teardown itself logs "terminated with -15" lines.
    lines = (data_dir / "sglang" / name).read_text().splitlines()
    cut = next((i for i, line in enumerate(lines) if "SIGTERM received" in line), len(lines))
    assert LogScanner().scan(lines[:cut], name) == []


def test_real_failed_boot_is_found_with_its_traceback(data_dir: Path) -> None:
    findings = LogScanner().scan_file(data_dir / "sglang" / "moe-q3-tp2-ep2.node0.log")
    kinds = {f.kind for f in findings}
    assert {"traceback", "exception"} <= kinds
    assert any("index -1 is out of bounds" in f.line for f in findings)
    assert all(f.line_no >= 1 for f in findings)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda-oom"),
        (
            "[2026-08-21 12:00:00 PP1 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, "
            "self.soft=False)",
            "watchdog",
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "ncclInternalError",
            "nccl",
        ),
        ("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/...]", "gloo"),
        ("misc/ibvwrap.cc:123 NCCL WARN Call to ibv_create_qp failed", "nccl"),
        (
            "[2026-08-21] Rank 0 scheduler is dead. Please check if there are relevant logs.",
            "consequence",
        ),
        # a peer's failure reported (the emulator's and Gloo's words): a consequence, not a cause
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed "
         "by peer [node_rank 1 exited]", "consequence"),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", "consequence"),
        # SGLang's subprocess watchdog (sglang/srt/utils/watchdog.py): killed by a signal is a
        # cause; a non-zero exit is the echo of the child's own error line
        ("[2026-11-29 16:12:10] Subprocess scheduler_0 (pid=746) crashed with exit code -9. "
         "Triggering SIGQUIT for cleanup...", "killed"),
        ("[2026-11-29 16:12:10] Subprocess scheduler_0 (pid=746) crashed with exit code 1. "
         "Triggering SIGQUIT for cleanup...", "sigquit"),
        ("Exception: Capture cuda graph failed: invalid argument", "engine"),
        ("ConnectionRefusedError: [Errno 111] Connection refused", "connection-refused"),
    ],
)
def test_fatal_patterns(line: str, kind: str) -> None:
    assert LogScanner().match(line) == kind


def test_benign_lines_are_not_fatal() -> None:
    scanner = LogScanner()
    for line in (
        "server_args=ServerArgs(watchdog_timeout=3000000, nccl_port=None, ...)",
        "Custom allreduce is disabled because this process group spans across nodes.",
        "Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.10",
    ):
        assert scanner.match(line) is None, line


def test_extra_patterns_from_the_matrix() -> None:
    assert LogScanner(["XID \\d+"]).match("NVRM: XID 79, GPU has fallen off the bus") == "custom-0"


def test_follower_reads_only_complete_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "node0.log"
    follower = LogFollower(log)
    assert follower.new_lines() == (1, [])
    log.write_text("a\nb")
    assert follower.new_lines() == (1, ["a"])
    with log.open("a") as fh:
        fh.write("c\nd\n")
    assert follower.new_lines() == (2, ["bc", "d"])


def test_real_server_info_topology(data_dir: Path) -> None:
    info = json.loads((data_dir / "sglang" / "n4-pp2tp2.server_info.json").read_text())
    topo = topology(info)
    assert (topo.pp, topo.tp, topo.nnodes) == (2, 2, 4)
    assert info["pp_max_micro_batch_size"] is None  # top level: only when passed
    assert topo.pp_max_micro_batch_size == info["internal_states"][0]["pp_max_micro_batch_size"]
    assert topo.pp_max_micro_batch_size == max(topo.max_running_requests // 2, 1)  # type: ignore[operator]
    assert topo.version == "0.5.23" and not topo.simulated and topo.time_scale == 1.0


class _HtmlPage(BaseHTTPRequestHandler):
    """Answers every GET with 200 and an HTML page (a proxy or another server on the port)."""

    def do_GET(self) -> None:
        body = b"<html><body>" + b"maintenance " * 40 + b"</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def html_server() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (in a thread) that answers HTML; its base URL."""
    with serving(_HtmlPage) as url:
        yield url


def test_server_info_that_is_not_json_says_what_answered(html_server: str) -> None:
    with pytest.raises(ValueError, match="answered 200") as info:
        server_info(html_server)
    text = str(info.value)
    assert text.startswith(f"GET {html_server}/server_info answered 200 (content type text/html")
    assert "'<html><body>maintenance maintenance" in text
    assert len(text) < 400  # the first ~200 characters of the body, not the whole page
    assert "Expecting value" not in text  # not the decoder's own message


def test_redaction_of_real_server_info(data_dir: Path) -> None:
    info = json.loads((data_dir / "sglang" / "n2-pp2.server_info.json").read_text())
    info["api_key"] = "sk-very-secret"
    info["internal_states"][0]["admin_api_key"] = "adm-secret"
    info["launch_command"] = "python -m sglang.launch_server --api-key sk-very-secret --port 1"
    red = redact(info)
    text = json.dumps(red)
    assert "secret" not in text
    assert red["api_key"] == REDACTED and red["internal_states"][0]["admin_api_key"] == REDACTED
    assert red["ssl_keyfile_password"] is None  # nulls stay null
    assert red["max_total_tokens"] == info["max_total_tokens"]  # not a secret
    assert "--api-key <redacted>" in red["launch_command"]
