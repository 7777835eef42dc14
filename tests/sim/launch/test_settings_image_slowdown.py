"""The emulator's per-image slowdown (sim/launch/settings.py): an image listed in
PPSWEEP_SIM_IMAGE_SLOWDOWN computes that much slower; a bad value names itself."""

from __future__ import annotations

import pytest

from pytest_ppsweep.sim.launch.settings import image_slowdown, load_settings
from pytest_ppsweep.sim.model.costmodel import compute_s
from pytest_ppsweep.sim.model.profile import load_profile, with_compute_factor


def test_a_listed_image_is_slower_and_others_are_not() -> None:
    spec = "reg/sglang:v6=1.05,reg/sglang@sha256:ab=2"
    assert image_slowdown(spec, "reg/sglang:v6") == 1.05
    assert image_slowdown(spec, "reg/sglang@sha256:ab") == 2.0
    assert image_slowdown(spec, "reg/sglang:v5") == 1.0
    assert image_slowdown(None, "reg/sglang:v6") == 1.0
    env = {"PPSWEEP_SIM_IMAGE": "reg/sglang:v6", "PPSWEEP_SIM_IMAGE_SLOWDOWN": spec}
    assert load_settings(env).compute_factor == 1.05
    base = load_profile()
    slow = with_compute_factor(base, 1.05)
    assert slow.compute.chunk_gpu_seconds == pytest.approx(base.compute.chunk_gpu_seconds * 1.05)
    assert slow.network == base.network and with_compute_factor(base, 1.0) is base
    assert compute_s(8192, 8, 8, slow) > compute_s(8192, 8, 8, base)


@pytest.mark.parametrize("bad", ["reg/sglang:v6", "reg/sglang:v6=fast", "=1.05", "a:1=0"])
def test_a_bad_value_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match="expected IMAGE=FACTOR"):
        image_slowdown(bad, "a:1")
