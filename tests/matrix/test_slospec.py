"""[workload.slo], request_rate and burstiness in the sweep file: read, and refused with file,
key, expected and found before anything launches."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from support.paths import REPO

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import MatrixError

# slo.toml's text, its shared cluster file named by its full path (the tests write it elsewhere)
SLO_TOML = (REPO / "test_matrix" / "slo.toml").read_text(encoding="utf-8").replace(
    'extends = "cluster.toml"', f'extends = "{REPO / "test_matrix" / "cluster.toml"}"')
SLO_TABLE = SLO_TOML[SLO_TOML.index("[workload.slo]"):]


def sweep_with(tmp_path: Path, slo: str, workload_extra: str = "") -> Path:
    text = SLO_TOML.replace(SLO_TABLE, slo + "\n")
    text = text.replace('api = "generate"\n', 'api = "generate"\n' + workload_extra, 1)
    path = tmp_path / "sweep.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_slo_sweep_reads() -> None:
    sweep = load(REPO / "test_matrix" / "slo.toml")
    slo = sweep.workload.slo
    assert slo is not None and slo.text() == "TTFT p50 ≤ 5 s"
    assert (slo.search, slo.low, slo.high, slo.max_probes) == ("rate", 0.05, 2.0, 8)
    assert slo.auto_requests  # sized before each search (measure/probesize.py)
    assert sweep.gpu_hour_usd == 2.0 and sweep.slo_workloads.keys() == {"default"}
    assert {c.pp for c in sweep.configs} == {1, 2, 4, 8, 16}


def test_limits_of_every_kind_and_open_loop_keys(tmp_path: Path) -> None:
    path = sweep_with(tmp_path, '[workload.slo]\nttft_p99_s = 9\ne2e_s = 12\n'
                      'attainment = 0.9\nsearch = "concurrency"\nmin = 1\nmax = 32\n',
                      'request_rate = 4.0\nburstiness = 0.5\n')
    w = load(path).workload
    assert w.request_rate == 4.0 and w.burstiness == 0.5
    assert w.slo is not None and w.slo.precision == 1.0 and w.slo.attainment == 0.9
    assert [str(x) for x in w.slo.limits] == ["TTFT p99 ≤ 9 s", "E2E per request ≤ 12 s"]
    assert [x.key for x in w.slo.request_limits] == ["e2e_s"]


def test_the_capacity_keys_default_and_read(tmp_path: Path) -> None:
    """precision_pct (10 %), max_refine (16) and requests (the workload's num_requests)."""
    plain = load(sweep_with(tmp_path, "[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\n"))
    slo = plain.workload.slo
    assert slo is not None and (slo.precision_pct, slo.max_refine, slo.requests) == (10.0, 16, 0)
    assert slo.probe_requests(plain.workload.num_requests) == plain.workload.num_requests
    path = sweep_with(tmp_path, "[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\n"
                      "precision_pct = 5\nmax_refine = 0\nrequests = 300\n")
    slo = load(path).workload.slo
    assert slo is not None and (slo.precision_pct, slo.max_refine) == (5.0, 0)
    assert slo.probe_requests(40) == 300
    auto = load(sweep_with(tmp_path, '[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\n'
                           'requests = "auto"\n')).workload.slo
    assert auto is not None and auto.auto_requests and auto.requests == 0
    with pytest.raises(MatrixError, match=r"key 'workload\.slo\.requests': expected an integer ≥ "
                                          r"1 or \"auto\", found 'lots'"):
        load(sweep_with(tmp_path, '[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\n'
                        'requests = "lots"\n'))


def test_an_open_loop_workload_needs_no_concurrency(tmp_path: Path) -> None:
    text = SLO_TOML.replace("concurrency = [8, 16]\n", 'request_rate = "inf"\n')
    (tmp_path / "s.toml").write_text(text, encoding="utf-8")
    with pytest.raises(MatrixError, match=r"workload\.concurrency"):
        load(tmp_path / "s.toml")  # inf is the closed loop: C is required
    (tmp_path / "s.toml").write_text(text.replace('"inf"', "2.5"), encoding="utf-8")
    w = load(tmp_path / "s.toml").workload
    assert w.request_rate == 2.5 and w.concurrency == (40,)
    assert math.isinf(load(REPO / "test_matrix" / "ppsweep.toml").workload.request_rate)


@pytest.mark.parametrize(("slo", "extra", "key", "found"), [
    ("[workload.slo]\nttft_p50 = 5\nmin = 1\nmax = 2\n", "", "workload.slo.ttft_p50",
     "did you mean 'ttft_p50_s'"),
    ("[workload.slo]\nmin = 1\nmax = 2\n", "", "workload.slo", "found none"),
    ("[workload.slo]\nttft_p50_s = 5\nmax = 2\n", "", "workload.slo.min", "found nothing"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 3\nmax = 2\n", "", "workload.slo.max", "found 2"),
    ("[workload.slo]\nttft_p50_s = -1\nmin = 1\nmax = 2\n", "", "workload.slo.ttft_p50_s",
     "found float -1"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\nsearch = \"qps\"\n", "",
     "workload.slo.search", "found str 'qps'"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\nmax_probes = 1\n", "",
     "workload.slo.max_probes", "found int 1"),
    ("[workload.slo]\ntpot_p99_s = 0.1\nmin = 1\nmax = 2\n", "", "workload.slo.tpot_p99_s",
     "output_len = 1"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\nconfidence = 1.0\n", "",
     "workload.slo.confidence", "found 1.0"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\ntrim = 0.5\n", "",
     "workload.slo.trim", "found 0.5"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\nprecision_pct = 0\n", "",
     "workload.slo.precision_pct", "found 0.0"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\nmax_refine = -1\n", "",
     "workload.slo.max_refine", "found int -1"),
    ("[workload.slo]\nttft_p50_s = 5\nmin = 1\nmax = 2\nrequests = 0\n", "",
     "workload.slo.requests", "found int 0"),
    ("[workload.slo]\nttft_p50_s = 5\nsearch = \"concurrency\"\nmin = 1\nmax = 64\n"
     "requests = 32\n", "", "workload.slo.max", "found int 64"),
    ("", "request_rate = 0\n", "workload.request_rate", "found int 0"),
    ("", "burstiness = 0\n", "workload.burstiness", "found 0.0"),
])
def test_bad_slo_input_names_file_key_expected_and_found(
        tmp_path: Path, slo: str, extra: str, key: str, found: str) -> None:
    path = sweep_with(tmp_path, slo, extra)
    with pytest.raises(MatrixError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message and f"'{key}" in message and found in message, message
    assert "expected" in message or "did you mean" in message


def test_a_price_must_be_positive(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SLO_TOML.replace("gpu_hour_usd = 2.0", "gpu_hour_usd = 0"), encoding="utf-8")
    with pytest.raises(MatrixError, match=r"'sweep\.gpu_hour_usd': expected a price > 0"):
        load(path)
