"""GPU energy against a real capture (tests/data/energy-h100: an H100 idle, then under a counted
GEMM load, then idle): the counter's difference, sampled power's integral with its edges
interpolated, the validity reasons, and the per-token figures that are never a number when the
energy is not valid."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from support.paths import DATA

from pytest_ppsweep.cluster.power import (
    CounterRead,
    PowerParseError,
    PowerSample,
    parse_nvml_reads,
    parse_smi_power_csv,
)
from pytest_ppsweep.measure import energy

CAPTURE = DATA / "energy-h100"
GPU = "h100:0"


def _rows() -> list[dict[str, str]]:
    with (CAPTURE / "nvml_samples.csv").open() as f:
        return list(csv.DictReader(f))


def _phase(name: str) -> dict[str, float]:
    meta = json.loads((CAPTURE / "meta.json").read_text())
    return next(p for p in meta["phases"] if p["name"] == name)


def _read_at(rows: list[dict[str, str]], t_wall: float, after: bool) -> CounterRead:
    """The last read at or before ``t_wall`` (``after=False``) or the first at or after it."""
    pick = [r for r in rows if (float(r["t_wall_s"]) >= t_wall if after
                                else float(r["t_wall_s"]) <= t_wall)]
    r = pick[0] if after else pick[-1]
    return CounterRead(GPU, float(r["t_wall_s"]), int(r["energy_mj"]))


def _nvml_mean_power(rows: list[dict[str, str]], start: float, end: float) -> float:
    inside = [int(r["power_mw"]) / 1000 for r in rows if start <= float(r["t_wall_s"]) <= end]
    return sum(inside) / len(inside)


@pytest.mark.parametrize("phase", ["load", "idle-before"])
def test_the_counters_difference_matches_the_power_it_reports(phase: str) -> None:
    rows = _rows()
    p = _phase(phase)
    before = _read_at(rows, p["start_wall_s"], after=False)
    after = _read_at(rows, p["end_wall_s"], after=True)
    w = energy.from_counter({GPU: before}, {GPU: after}, expected_gpus=1)
    assert w.valid, w.reasons
    assert w.joules is not None and w.mean_power_w is not None
    span = after.t_s - before.t_s
    # NVML's own power reads over the same window agree within 3 %
    assert w.mean_power_w == pytest.approx(_nvml_mean_power(rows, before.t_s, after.t_s),
                                           rel=0.03)
    # and the phases are what the capture did: ~116 W idle (context up), ~670 W under GEMMs
    assert (600 < w.mean_power_w < 700) if phase == "load" else (60 < w.mean_power_w < 200)
    assert w.uncertainty_j == pytest.approx(2 * energy.COUNTER_STEP_S * w.joules / span)


def test_sampled_power_from_nvidia_smi_agrees_with_the_counter() -> None:
    rows = _rows()
    p = _phase("load")
    samples = parse_smi_power_csv("h100", (CAPTURE / "smi_power.csv").read_text())
    assert len(samples) > 200 and {s.gpu for s in samples} == {GPU}
    by_power = energy.from_power(samples, p["start_wall_s"], p["end_wall_s"], expected_gpus=1)
    by_counter = energy.from_counter(
        {GPU: _read_at(rows, p["start_wall_s"], after=False)},
        {GPU: _read_at(rows, p["end_wall_s"], after=True)}, expected_gpus=1)
    assert by_power.valid and by_power.method == "sampled_power"
    assert by_power.joules is not None and by_counter.joules is not None
    # the counter's window is up to one read wider at each end: compare the mean power
    assert by_power.mean_power_w == pytest.approx(by_counter.mean_power_w, rel=0.05)


def test_edges_are_interpolated_between_the_samples_either_side() -> None:
    s = [PowerSample(GPU, 0.0, 100.0), PowerSample(GPU, 10.0, 200.0)]
    w = energy.from_power(s, 2.0, 4.0, expected_gpus=1, max_gap_s=10.0)
    # power 120 W at 2 s and 140 W at 4 s: 2 s × 130 W
    assert w.joules == pytest.approx(260.0)
    # the samples around the window are 10 s apart: over a 2 s max gap, not valid
    assert energy.from_power(s, 2.0, 4.0, expected_gpus=1).reasons == (energy.SAMPLING_GAP,)


def test_a_window_the_samples_do_not_bracket_is_not_valid() -> None:
    samples = parse_smi_power_csv("h100", (CAPTURE / "smi_power.csv").read_text())
    p = _phase("load")
    cut = [s for s in samples if s.t_s < p["end_wall_s"] - 1.0]
    w = energy.from_power(cut, p["start_wall_s"], p["end_wall_s"], expected_gpus=1)
    assert not w.valid and w.reasons == (energy.NOT_BRACKETED,)
    assert w.joules is None and w.mean_power_w is None


def test_a_gap_in_the_samples_makes_the_figure_invalid() -> None:
    samples = parse_smi_power_csv("h100", (CAPTURE / "smi_power.csv").read_text())
    p = _phase("load")
    mid = (p["start_wall_s"] + p["end_wall_s"]) / 2
    holed = [s for s in samples if not mid - 1.5 < s.t_s < mid + 1.5]
    w = energy.from_power(holed, p["start_wall_s"], p["end_wall_s"], expected_gpus=1)
    assert w.reasons == (energy.SAMPLING_GAP,)
    # with the samples kept, the same window is valid at the same max gap
    assert energy.from_power(samples, p["start_wall_s"], p["end_wall_s"], 1).valid


def test_the_gpu_count_the_layout_uses_must_be_there() -> None:
    a = {GPU: CounterRead(GPU, 0.0, 1_000_000)}
    b = {GPU: CounterRead(GPU, 100.0, 51_000_000)}
    assert energy.from_counter(a, b, expected_gpus=1).joules == pytest.approx(50_000.0)
    w = energy.from_counter(a, b, expected_gpus=2)
    assert w.reasons == (energy.EXPECTED_GPU_COUNT_MISMATCH,) and w.joules is None


def test_a_counter_missing_at_one_end_or_reset_is_named() -> None:
    other = "h100:1"
    before = {GPU: CounterRead(GPU, 0.0, 5_000_000), other: CounterRead(other, 0.0, 9_000)}
    after = {GPU: CounterRead(GPU, 60.0, 1_000)}
    w = energy.from_counter(before, after, expected_gpus=2)
    assert set(w.reasons) == {energy.COUNTER_RESET, energy.COUNTER_MISSING}
    assert w.joules is None


def test_a_window_shorter_than_the_counter_step_allows_is_not_valid() -> None:
    a = {GPU: CounterRead(GPU, 0.0, 0)}
    b = {GPU: CounterRead(GPU, 2.0, 1_000_000)}  # 2 s: each end may be 0.1 s stale, 10 %
    assert energy.from_counter(a, b, 1).reasons == (energy.WINDOW_TOO_SHORT,)
    b = {GPU: CounterRead(GPU, 20.0, 10_000_000)}  # 20 s: 1 %
    assert energy.from_counter(a, b, 1).valid


def test_per_token_figures_and_never_a_number_for_an_invalid_window() -> None:
    a = {GPU: CounterRead(GPU, 0.0, 0)}
    b = {GPU: CounterRead(GPU, 40.0, 20_000_000)}  # 20 kJ
    per = energy.from_counter(a, b, 1).per_token(input_tokens=16_384 * 40, output_tokens=40,
                                                 requests=40)
    assert per.j_per_request == pytest.approx(500.0)
    assert per.j_per_output_token == pytest.approx(500.0)
    assert per.j_per_total_token == pytest.approx(20_000 / (16_384 * 40 + 40))
    assert "J/token" in per.text() and energy.LABEL in per.text()
    doc = per.as_json()
    assert doc["schema_version"] == energy.SCHEMA_VERSION and doc["label"] == energy.LABEL
    bad = energy.from_counter(a, b, 2).per_token(100, 10, 1)
    assert bad.j_per_total_token is None and bad.j_per_request is None
    assert bad.text() == "energy not valid (expected_gpu_count_mismatch)"
    assert energy.from_counter(a, b, 2).as_json()["joules"] is None


def test_nvml_reads_of_a_node_parse_and_a_gpu_without_the_counter_gives_none() -> None:
    text = ('noise\n{"t_wall_s": 12.5, "gpus": [{"index": 0, "energy_mj": 7, "power_mw": 71000},'
            ' {"index": 1, "energy_mj": null, "power_mw": 65000}]}\n')
    reads, samples = parse_nvml_reads("h601", text)
    assert reads == [CounterRead("h601:0", 12.5, 7)]
    assert samples == [PowerSample("h601:0", 12.5, 71.0), PowerSample("h601:1", 12.5, 65.0)]
    with pytest.raises(PowerParseError, match="h601: expected one JSON line"):
        parse_nvml_reads("h601", "Traceback: ModuleNotFoundError: pynvml")


def test_a_csv_without_the_power_column_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PowerParseError, match=r"h602: nvidia-smi's CSV has no power.draw column"):
        parse_smi_power_csv("h602", "timestamp, index, name\n2026/12/07 06:10:42.017, 0, H100\n")
    na = ("timestamp, index, power.draw [W]\n2026/12/07 06:10:42.017, 0, [N/A]\n"
          "2026/12/07 06:10:42.117, 0, 70.00 W\n")
    assert [s.power_w for s in parse_smi_power_csv("h602", na)] == [70.0]
