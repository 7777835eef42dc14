"""Bisection on the emulator: eight images, the sixth slowed by 10 % (and every one after it,
as a regression stays): ``bisect`` finds it in three gate runs, the good and the bad image's
runs reused from the history."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.paths import REPO

IMAGES = [f"reg/sglang:v{i}" for i in range(1, 9)]
FIRST_BAD = 5  # reg/sglang:v6
# One layout, C=4, three repeats of 12 requests of 16k tokens at time scale 25, on a profile
# that boots in seconds: each round lasts over a second of real time, so the real-time noise of
# a loaded 2-core machine stays under the slowdown (at time scale 100-200, rounds of 0.2-0.5 s
# read 12-23 % noise there, and the gate rightly called 5 % "within noise"). The slowdown is
# 10 % against a 5 % threshold: with one core kept busy beside the suite, one run of an
# unchanged image read 3.7 % below another (the load moved between the two runs; each run's
# own rounds agreed within 1 %), which a 2 % threshold called a regression.
EDITS = {
    "input_len = 4096": "input_len = 16384",
    "num_requests = 6": "num_requests = 12",
    "concurrency = [2, 4]": "concurrency = [4]",
    "repeats = 2": "repeats = 3",
    # sim/launch/settings.py: the image each rank stands for, and the images that regressed
    "PPSWEEP_SIM_TIME_SCALE =": 'PPSWEEP_SIM_IMAGE = "{image}", PPSWEEP_SIM_IMAGE_SLOWDOWN = "'
    + ",".join(f"{i}=1.10" for i in IMAGES[FIRST_BAD:]) + '", PPSWEEP_SIM_TIME_SCALE =',
}
ONE = "\n[[configs]]\npp = 4\ntp = 8\n"
# [boot] of the shipped profile cut to seconds (the bisection is about rounds, not boots)
FAST_BOOT = {"launch_s": 1.0, "disk_read_gbs": 500.0, "graph_capture_s_per_layer": 0.01,
             "warmup_jit_s_per_stage": 0.1}


def fast_boot_profile(tmp_path: Path) -> Path:
    lines = []
    for line in (REPO / "pytest_ppsweep" / "sim" / "profiles" / "kimi-k3-6000d.toml"
                 ).read_text().splitlines():
        key = line.split("=")[0].strip()
        lines.append(f"{key} = {FAST_BOOT[key]}" if key in FAST_BOOT else line)
    path = tmp_path / "fast-boot.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
GATE = ("--threshold", "input_tps:-5%", "--threshold", "ttft_p50:+50%")


def test_bisect_finds_the_first_slow_image_in_three_gate_runs(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    edits = {**EDITS, "PPSWEEP_SIM_TIME_SCALE =": f'PPSWEEP_SIM_PROFILE = '
             f'"{fast_boot_profile(tmp_path)}", ' + EDITS["PPSWEEP_SIM_TIME_SCALE ="]}
    folder = sweep_dir(ONE, scale=25, edits=edits)
    reports = tmp_path / "reports"
    for image, run_id in ((IMAGES[0], "v1"), (IMAGES[-1], "v8")):  # the gate runs made before
        result = pytester.runpytest_subprocess(
            str(folder), "--ppsweep-reports", str(reports), "--ppsweep-run-id", run_id,
            "--ppsweep-image", image, timeout=300)
        assert (reports / run_id / "results.csv").is_file(), result.stdout.str()[-3000:]
    images = tmp_path / "images.txt"
    images.write_text("# oldest first\n" + "\n".join(IMAGES) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_ppsweep", "bisect", "--good", IMAGES[0], "--bad",
         IMAGES[-1], "--images", str(images), "--sweep", str(folder), "--reports",
         str(reports), *GATE], capture_output=True, text=True, timeout=600, check=False)
    out = done.stdout
    if done.returncode != 0:  # the gate's own table of the bad vs the good image says why
        table = subprocess.run([sys.executable, "-m", "pytest_ppsweep", "compare", "v1", "v8",
                                "--reports", str(reports)], capture_output=True, text=True,
                               timeout=120, check=False)
        launch = next((reports / "v8" / "service").rglob("*.txt"), None)
        pytest.fail(out + done.stderr + table.stdout + table.stderr
                    + (launch.read_text()[:2000] if launch else ""))
    assert f"first bad image: {IMAGES[FIRST_BAD]} (last good: {IMAGES[FIRST_BAD - 1]})" in out
    assert "gate runs made: 3" in out, out
    assert f"{IMAGES[0]}: good (history: v1)" in out and f"{IMAGES[-1]}: bad (history: v8)" in out
    # its evidence at the gate's rule: the first bad image's regression against the good one
    evidence = out.split("evidence against the good image")[1].split("evidence against")[0]
    assert "REGRESSION pp4-tp8-ep4 C=4: Input TPS" in evidence, out
    assert f"evidence against the last good image {IMAGES[FIRST_BAD - 1]}:" in out
    # every gate run is in the history: a second bisection measures nothing
    again = subprocess.run(
        [sys.executable, "-m", "pytest_ppsweep", "bisect", "--good", IMAGES[0], "--bad",
         IMAGES[-1], "--images", ",".join(IMAGES), "--sweep", str(folder), "--reports",
         str(reports), *GATE], capture_output=True, text=True, timeout=120, check=False)
    assert "gate runs made: 0" in again.stdout, again.stdout + again.stderr
    assert f"first bad image: {IMAGES[FIRST_BAD]}" in again.stdout
