"""``[workload] type``: a Mooncake trace replayed and a shared-prefix workload, each read and
checked when the sweep is (a wrong key names file, key, what was expected and what was found)."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest
from support.matrices import seed_text
from support.paths import DATA

from pytest_ppsweep.matrix.model import MatrixError
from pytest_ppsweep.matrix.parse import load

SMALL = DATA / "mooncake" / "small.jsonl"
_WORKLOAD = re.compile(r"\[workload\]\n(?:(?!\n\[).)*", re.S)


def _sweep(tmp_path: Path, workload: str) -> Path:
    """The seed sweep with its [workload] table replaced (the trace copied beside it)."""
    shutil.copy(SMALL, tmp_path / "small.jsonl")
    text, n = _WORKLOAD.subn("[workload]\n" + workload.strip() + "\n", seed_text(), count=1)
    assert n == 1
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    return path


def _refused(path: Path, *patterns: str) -> str:
    with pytest.raises(MatrixError) as info:
        load(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    for p in patterns:
        assert re.search(p, msg), f"{p!r} not in {msg!r}"
    return msg


def test_a_trace_workload_takes_the_traces_requests_and_mean_lengths(tmp_path: Path) -> None:
    w = load(_sweep(tmp_path, 'type = "trace"\npath = "small.jsonl"\ntime_scale = 2.0\n'
                              'vocab_size = 256\n')).workload
    assert (w.type, w.trace, w.time_scale, w.num_requests) == ("trace", "small.jsonl", 2.0, 24)
    assert w.trace_file == str((tmp_path / "small.jsonl").resolve())
    assert w.concurrency == (24,) and math.isinf(w.request_rate)  # open loop, no cap
    assert w.input_len > 100 and w.output_len > 1 and w.hit_tolerance == 0.05
    shown = w.as_json()
    assert shown["trace"] == "small.jsonl" and len(shown["trace_sha256"]) == 64
    assert "trace_file" not in shown  # where this checkout keeps it is no part of the workload
    first = load(_sweep(tmp_path, 'type = "trace"\npath = "small.jsonl"\nnum_requests = 5\n'
                                  'concurrency = [1]\n')).workload
    assert (first.num_requests, first.concurrency) == (5, (1,))


def test_a_random_ids_workload_reads_as_it_always_did() -> None:
    from support.paths import REPO
    w = load(REPO / "test_matrix" / "ppsweep.toml").workload
    assert w.type == "random-ids" and not w.shared
    assert not {"type", "trace", "trace_sha256", "time_scale", "prefix_len", "prefix_share",
                "hit_tolerance", "trace_file"} & set(w.as_json())


def test_a_shared_prefix_workload_states_its_share_and_length(tmp_path: Path) -> None:
    w = load(_sweep(tmp_path, 'type = "shared_prefix"\ninput_len = 256\noutput_len = 4\n'
                              'num_requests = 10\nconcurrency = [1]\nprefix_len = 192\n'
                              'prefix_share = 0.8\nhit_tolerance = 0.1\n')).workload
    assert (w.type, w.prefix_len, w.prefix_share, w.hit_tolerance) == (
        "shared_prefix", 192, 0.8, 0.1)
    assert w.shared and w.as_json()["prefix_share"] == 0.8


@pytest.mark.parametrize(("table", "patterns"), [
    ('type = "mooncake"\n', [r"workload\.type", r"expected one of 'random-ids', 'trace', "
                                                 r"'shared_prefix'", "mooncake"]),
    ('type = "trace"\n', [r"workload\.path", "required"]),
    ('type = "trace"\npath = "nowhere.jsonl"\n',
     [r"workload\.path", "expected a Mooncake-format trace", "no such trace file"]),
    ('type = "trace"\npath = "small.jsonl"\ninput_len = 100\n',
     [r"workload\.input_len", "expected no input_len on a workload of type 'trace'", "100"]),
    ('type = "trace"\npath = "small.jsonl"\ntime_scale = 2.0\nrequest_rate = 4\n',
     [r"workload\.request_rate", "either time_scale", "found both"]),
    ('type = "trace"\npath = "small.jsonl"\ntime_scale = 0\n',
     [r"workload\.time_scale", "expected a factor > 0", "0"]),
    ('type = "trace"\npath = "small.jsonl"\nnum_requests = 25\n',
     [r"workload\.num_requests", "at most the trace's 24 requests", "25"]),
    ('type = "trace"\npath = "small.jsonl"\nconcurrency = [1]\n[workload.slo]\nttft_p99_s = 1.0\n',
     [r"workload\.slo", "expected no \\[slo\\] on a workload of type 'trace'"]),
    ('type = "trace"\npath = "small.jsonl"\nhit_tolerance = 2\n',
     [r"workload\.hit_tolerance", r"\[0, 1\]", "2"]),
    ('type = "shared_prefix"\ninput_len = 64\noutput_len = 1\nnum_requests = 4\n'
     'prefix_share = 0.5\n', [r"workload\.prefix_len", "required"]),
    ('type = "shared_prefix"\ninput_len = 64\noutput_len = 1\nnum_requests = 4\n'
     'prefix_len = 64\nprefix_share = 0.5\n',
     [r"workload\.prefix_len", "fewer tokens than input_len 64", "64"]),
    ('type = "shared_prefix"\ninput_len = 64\noutput_len = 1\nnum_requests = 4\n'
     'prefix_len = 32\nprefix_share = 1.5\n', [r"workload\.prefix_share", r"\[0, 1\]", "1.5"]),
    ('type = "shared_prefix"\ninput_len = 64\noutput_len = 1\nnum_requests = 4\n'
     'prefix_len = 32\nprefix_share = 0.5\npath = "small.jsonl"\n',
     [r"workload\.path", "expected no path on a workload of type 'shared_prefix'"]),
    ('input_len = 64\noutput_len = 1\nnum_requests = 4\nconcurrency = [1]\nprefix_len = 32\n',
     [r"workload\.prefix_len", "expected no prefix_len on a workload of type 'random-ids'"]),
])
def test_wrong_workload_type_keys_are_refused(tmp_path: Path, table: str,
                                              patterns: list[str]) -> None:
    _refused(_sweep(tmp_path, table + ("concurrency = [1]\n" if "concurrency" not in table
                                       else "")), *patterns)


def test_a_bad_trace_line_is_named_by_the_sweep_key_and_the_trace_line(tmp_path: Path) -> None:
    path = _sweep(tmp_path, 'type = "trace"\npath = "small.jsonl"\n')
    lines = (tmp_path / "small.jsonl").read_text().splitlines()
    lines[2] = lines[2].replace('"output_length"', '"output_len"')
    (tmp_path / "small.jsonl").write_text("\n".join(lines) + "\n")
    _refused(path, r"workload\.path", r"small\.jsonl: line 3: missing key output_length")


def test_a_named_workload_ignores_common_keys_its_type_does_not_take(tmp_path: Path) -> None:
    shutil.copy(SMALL, tmp_path / "small.jsonl")
    text = _WORKLOAD.sub("[workload]\ninput_len = 64\noutput_len = 1\nnum_requests = 4\n"
                         "concurrency = [1]\nvocab_size = 256\n\n[workloads.prefill]\n\n"
                         "[workloads.replay]\ntype = \"trace\"\npath = \"small.jsonl\"\n",
                         seed_text(), count=1)
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    sweep = load(path)
    assert sweep.workloads["replay"].type == "trace"
    replay = sweep.workloads["replay"]
    # a common key its type takes applies (the trace's first 4 requests); input_len does not
    assert replay.num_requests == 4 and replay.input_len != 64
    assert sweep.workloads["prefill"].type == "random-ids"
