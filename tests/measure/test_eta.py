"""``layout 3/5`` and an ETA from the boots and rounds measured so far."""

from __future__ import annotations

import pytest

from pytest_ppsweep.measure.eta import SweepClock, duration


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_position_and_eta_from_what_was_measured() -> None:
    clock = _Clock()
    sweep = SweepClock({"pp1": 6, "pp2": 6, "pp4": 6}, clock)
    assert sweep.describe("pp2") == "layout 2/3"  # nothing measured: no ETA, no guess
    sweep.begin()
    clock.now = 100.0
    sweep.boot_done("pp1", 100.0)
    assert sweep.eta_s() is None  # a boot, no round yet
    for _ in range(6):
        sweep.begin()
        clock.now += 10.0
        sweep.round_done("pp1", 10.0)
    # 2 boots × 100 s + 12 rounds × 10 s
    assert sweep.eta_s() == pytest.approx(320.0)
    assert sweep.describe("pp1") == "layout 1/3, ETA 5 min"
    sweep.begin()
    clock.now += 40.0  # pp2 is booting for 40 s already
    assert sweep.eta_s() == pytest.approx(280.0)
    sweep.boot_done("pp2", 60.0)  # the mean boot is now 80 s
    sweep.skipped("pp4")  # reused: no boot, no rounds
    assert sweep.eta_s() == pytest.approx(60.0)
    assert sweep.position("other") == "" and sweep.describe("other") == ""


def test_workloads_sharing_a_boot_count_one_boot() -> None:
    clock = _Clock()
    groups = {"pp1-prefill": "pp1-prefill", "pp1-decode": "pp1-prefill", "pp2-prefill":
              "pp2-prefill", "pp2-decode": "pp2-prefill"}
    sweep = SweepClock(dict.fromkeys(groups, 2), clock, groups=groups)
    sweep.boot_done("pp1-prefill", 100.0)
    sweep.round_done("pp1-prefill", 10.0)
    # pp1's decode runs on pp1's boot: one boot left (pp2's), 7 rounds
    assert sweep.eta_s() == pytest.approx(100.0 + 7 * 10.0)
    # one layout's own time (a Slurm allocation's time left is compared with it): pp1's decode
    # needs no boot, pp2's prefill one
    assert sweep.layout_s("pp1-decode") == pytest.approx(20.0)
    assert sweep.layout_s("pp2-prefill") == pytest.approx(120.0)
    assert SweepClock({"pp1": 2}, clock).layout_s("pp1") is None  # nothing measured: no guess


@pytest.mark.parametrize(("seconds", "shown"), [(12.4, "12 s"), (600, "10 min"),
                                                 (9000, "2.5 h")])
def test_duration(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_points_sharing_boots_count_boots_and_points_in_boot_order() -> None:
    """microbatch.toml's shape: 4 boots of 2 workloads each. The points run boot by boot; each
    says its boot and its point, never 'layout 3/8' for the second boot."""
    ids = ["pp4-prefill", "pp4-mbs1-prefill", "pp4-decode", "pp4-mbs1-decode"]
    groups = {"pp4-prefill": "pp4-prefill", "pp4-decode": "pp4-prefill",
              "pp4-mbs1-prefill": "pp4-mbs1-prefill", "pp4-mbs1-decode": "pp4-mbs1-prefill"}
    sweep = SweepClock(dict.fromkeys(ids, 2), _Clock(), groups=groups)
    assert [sweep.position(x) for x in sweep.order] == [
        "boot 1/2, point 1/4", "boot 1/2, point 2/4", "boot 2/2, point 3/4",
        "boot 2/2, point 4/4"]
    assert sweep.order == ["pp4-prefill", "pp4-decode", "pp4-mbs1-prefill", "pp4-mbs1-decode"]


def test_reused_points_are_counted_apart() -> None:
    """A resumed run: the points done before are not this process's to run, and are said."""
    sweep = SweepClock({"pp8": 6}, _Clock(), reused=4)
    assert sweep.position("pp8") == "layout 1/1 (4 reused)"


def test_several_boots_per_layout_count_every_boot() -> None:
    """[sweep] boots = 2: the position says which boot of the layout it is, the ETA counts the
    boots still to make and the rounds of all of them, and a layout's time (a Slurm allocation's
    check) is its current boot's."""
    clock = _Clock()
    sweep = SweepClock({"pp1": 4, "pp2": 4}, clock, boots=2)  # 2 rounds per boot
    assert sweep.describe("pp1") == "layout 1/2, boot 1/2"
    sweep.boot_done("pp1", 100.0)
    sweep.round_done("pp1", 10.0)
    sweep.round_done("pp1", 10.0)
    # 3 boots to make (pp1's 2nd, both of pp2) × 100 s + 6 rounds × 10 s
    assert sweep.eta_s() == pytest.approx(360.0)
    assert sweep.describe("pp1") == "layout 1/2, boot 1/2, ETA 6 min"
    assert sweep.describe("pp2") == "layout 2/2, boot 1/2, ETA 6 min"
    assert sweep.layout_s("pp2") == pytest.approx(120.0)  # its boot and its 2 rounds
    sweep.boot_done("pp2", 100.0)
    sweep.round_done("pp2", 10.0)
    assert sweep.layout_s("pp2") == pytest.approx(10.0)  # one round of this boot left
    sweep.round_done("pp2", 10.0)
    assert sweep.describe("pp1") == "layout 1/2, boot 2/2, ETA 4 min"  # pp1's 2nd is next
    sweep.boot_done("pp1", 100.0)
    assert sweep.describe("pp1").startswith("layout 1/2, boot 2/2")
    sweep.skipped("pp2")  # its boot failed: no later boot, no rounds
    assert sweep.eta_s() == pytest.approx(20.0)  # pp1's two rounds of boot 2
