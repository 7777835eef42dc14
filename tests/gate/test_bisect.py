"""The bisection's search (gate/bisect.py) on recorded run folders: the gate's comparison
judges each image, an unbootable image is reported and skipped, history runs are reused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from support.runs import Point, record_run

from pytest_ppsweep.gate.bisect import (
    BAD,
    GOOD,
    NO_BOOT,
    UNCLEAR,
    BisectError,
    RunOf,
    Wanted,
    read_images,
    search,
)
from pytest_ppsweep.gate.comparison import parse_thresholds

IMAGES = [f"reg/sglang:v{i}" for i in range(1, 9)]
THRESHOLDS = parse_thresholds(["input_tps:-2%", "ttft_p50:+50%"])


points_asked: list[tuple[tuple[str, int], ...] | None] = []  # what each run_of was asked


def fake_gate(root: Path, slow_from: int, no_boot: Sequence[str] = (),
              noisy: Sequence[str] = ()) -> tuple[RunOf, list[str]]:
    """run_of for :func:`search`: a run folder per image, 5 % slower from ``slow_from`` on;
    the images of ``no_boot`` fail at boot; those of ``noisy`` are 4 % slower with rounds
    ±10 % apart (worse than the threshold, within their noise). Records what was measured."""
    asked: list[str] = []
    points_asked.clear()

    def run_of(image: str, wanted: Wanted | None) -> tuple[Path | None, bool, str]:
        asked.append(image)
        points_asked.append(None if wanted is None else tuple(wanted))
        index = IMAGES.index(image)
        factor = 0.95 if index >= slow_from else 0.96 if image in noisy else 1.0
        jitter = 0.1 if image in noisy else 0.002
        points = [Point("pp8-tp4-ep4", 8, 4, 4, 8, 8800.0 * factor, 1.2, 1.4, jitter),
                  Point("pp4-tp8-ep4", 4, 8, 4, 8, 8000.0, 1.3, 1.5, 0.002)]
        if image in no_boot:
            return record_run(root, f"run-{index}", points[1:], failed_boot=("pp8-tp4-ep4",)
                              ), False, ""
        return record_run(root, f"run-{index}", points), False, ""

    return run_of, asked


def test_finds_the_first_slow_image_in_three_runs(tmp_path: Path) -> None:
    run_of, asked = fake_gate(tmp_path, slow_from=5)
    outcome = search(IMAGES, IMAGES[0], IMAGES[-1], run_of, THRESHOLDS)
    assert outcome.first_bad == IMAGES[5] and outcome.last_good == IMAGES[4]
    assert outcome.regressed == (("pp8-tp4-ep4", 8, "input_tps"),)
    assert len(asked) - 2 == 3  # the good and the bad image, then three gate runs
    # every point of the good and bad images; then only the regressed point (layout and C)
    assert points_asked == [None, None] + [(("pp8-tp4-ep4", 8),)] * 3
    assert [r.verdict for r in outcome.evidence] == ["regression"]
    text = "\n".join(outcome.lines())
    assert f"first bad image: {IMAGES[5]} (last good: {IMAGES[4]})" in text
    assert "REGRESSION pp8-tp4-ep4 C=8: Input TPS" in text


@pytest.mark.parametrize("slow_from", range(1, 8))
def test_any_first_bad_image_is_found(tmp_path: Path, slow_from: int) -> None:
    run_of, asked = fake_gate(tmp_path, slow_from)
    outcome = search(IMAGES, IMAGES[0], IMAGES[-1], run_of, THRESHOLDS)
    assert outcome.first_bad == IMAGES[slow_from]
    assert len(asked) - 2 <= 3


def test_an_image_that_does_not_boot_is_reported_and_skipped(tmp_path: Path) -> None:
    run_of, _ = fake_gate(tmp_path, slow_from=5, no_boot=[IMAGES[3], IMAGES[4]])
    outcome = search(IMAGES, IMAGES[0], IMAGES[-1], run_of, THRESHOLDS)
    states = {j.image: j.state for j in outcome.judged}
    assert states[IMAGES[3]] == NO_BOOT and states[IMAGES[5]] == BAD
    assert states[IMAGES[2]] == GOOD
    assert outcome.first_bad == IMAGES[5] and outcome.last_good == IMAGES[2]
    assert outcome.undecided == (IMAGES[3], IMAGES[4])
    text = "\n".join(outcome.lines())
    assert f"{IMAGES[3]}: does not boot" in text and "did not boot" in text
    assert f"or one of {IMAGES[3]}, {IMAGES[4]} before it (they do not boot" in text


def test_an_image_not_told_from_noise_is_skipped_never_judged_good(tmp_path: Path) -> None:
    # Judged good, the noisy image would move the search past it; skipped, the first bad image
    # is named with it as the one that could also be.
    run_of, _ = fake_gate(tmp_path, slow_from=5, noisy=[IMAGES[4]])
    outcome = search(IMAGES, IMAGES[0], IMAGES[-1], run_of, THRESHOLDS)
    states = {j.image: j.state for j in outcome.judged}
    assert states[IMAGES[4]] == UNCLEAR and states[IMAGES[5]] == BAD
    assert outcome.first_bad == IMAGES[5] and outcome.last_good == IMAGES[3]
    assert outcome.undecided == (IMAGES[4],)
    text = "\n".join(outcome.lines())
    assert f"{IMAGES[4]}: not told from noise" in text and "inconclusive" in text


def test_no_regression_between_good_and_bad_says_so(tmp_path: Path) -> None:
    run_of, asked = fake_gate(tmp_path, slow_from=99)
    outcome = search(IMAGES, IMAGES[0], IMAGES[-1], run_of, THRESHOLDS)
    assert outcome.first_bad is None and asked == [IMAGES[0], IMAGES[-1]]
    assert "no first bad image found" in outcome.lines()


def test_bad_input_is_named(tmp_path: Path) -> None:
    run_of, _ = fake_gate(tmp_path, slow_from=5)
    with pytest.raises(BisectError, match="--good nope: not in --images"):
        search(IMAGES, "nope", IMAGES[-1], run_of)
    with pytest.raises(BisectError, match="must come before"):
        search(IMAGES, IMAGES[4], IMAGES[1], run_of)
    with pytest.raises(BisectError, match="listed twice"):
        search([*IMAGES, IMAGES[0]], IMAGES[0], IMAGES[1], run_of)
    images = tmp_path / "images.txt"
    images.write_text("# oldest first\na:1\n\na:2  # the fix\n")
    assert read_images(str(images)) == ["a:1", "a:2"]
    assert read_images("a:1, a:2") == ["a:1", "a:2"]
    with pytest.raises(BisectError, match="no such file"):
        read_images(str(tmp_path / "missing" / "list.txt"))
