"""Sequential looks: α spent over the looks by a Bonferroni bound, so the
error rate holds under optional stopping; and the stopping rule that asks for one more round."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import pytest
from support.paths import REPO

from pytest_ppsweep.matrix.model import MatrixError
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.stats.decision import (
    DEFAULT_RULE,
    Rule,
    Sample,
    interval,
    look_weights,
    more_rounds_to_decide,
)

SEQ = Rule(first_look=3, last_look=8)


def test_look_weights_sum_to_one_half_at_the_cap() -> None:
    assert look_weights(1) == [1.0]
    w = look_weights(6)
    assert math.isclose(sum(w), 1.0) and w[-1] == 0.5 and len(set(w[:-1])) == 1
    assert SEQ.looks == 6 and DEFAULT_RULE.looks == 1 and Rule(first_look=3, last_look=3).looks == 1
    assert "sequential over 6 looks (3..8 rounds)" in SEQ.text and "sequential" not in (
        DEFAULT_RULE.text)


def test_one_look_is_the_fixed_design() -> None:
    a, b = [1010.0, 1012.0, 1008.0], [1000.0, 1001.0, 999.0]
    fixed = interval(a, b, DEFAULT_RULE)
    seq = interval(a, b, SEQ)
    assert fixed is not None and seq is not None
    # with only the planned rounds there is one look, at its share of α: p / w_1
    assert math.isclose(seq.p_value, min(1.0, fixed.p_value / look_weights(6)[0]))
    assert seq.half_width_pct > fixed.half_width_pct  # the last look's interval, at 0.5 α


def test_the_corrected_p_is_the_best_look_over_its_share() -> None:
    rng = random.Random(3)
    a = [1000 * math.exp(rng.gauss(0.02, 0.01)) for _ in range(8)]
    b = [1000 * math.exp(rng.gauss(0.0, 0.01)) for _ in range(3)]
    w = look_weights(6)
    looks = [interval(a[:m], b, DEFAULT_RULE) for m in range(3, 9)]
    want = min(iv.p_value / w[j] for j, iv in enumerate(looks) if iv is not None)
    got = interval(a, b, SEQ)
    assert got is not None and math.isclose(got.p_value, min(1.0, want))


def test_a_look_is_the_later_points_prefix_against_all_of_the_earlier_ones() -> None:
    early = [988.3, 988.6, 1006.7, 977.3, 998.6, 977.7, 1011.1, 1002.0]  # torn down first
    late = [1015.0, 1005.0, 1025.0, 1012.0]
    w = look_weights(6)
    got = interval(late, early, SEQ, later=True)
    want = min(interval(late[:3], early, DEFAULT_RULE).p_value / w[0],  # type: ignore[union-attr]
               interval(late, early, DEFAULT_RULE).p_value / w[1])  # type: ignore[union-attr]
    assert got is not None and math.isclose(got.p_value, min(1.0, want))
    # the same comparison from the other side: the same looks
    other = interval(early, late, SEQ, later=False)
    assert other is not None and math.isclose(other.p_value, got.p_value)
    assert SEQ.later("a", "b") is None
    ordered = Rule(first_look=3, last_look=8, order=("early", "late"))
    assert ordered.later("late", "early") is True and ordered.later("early", "late") is False


def test_the_last_look_uses_every_round_beyond_the_cap() -> None:
    # Two boots of three rounds against a cap of four (boots × repeats beyond max_repeats): the
    # last look takes all six rounds of each side, the interim looks their prefixes.
    rule = Rule(first_look=3, last_look=4)
    a = Sample([1010.0, 1012.0, 1008.0, 1030.0, 1028.0, 1031.0], [1, 1, 1, 2, 2, 2])
    b = Sample([1000.0, 1001.0, 999.0, 1002.0, 1000.0, 1001.0], [1, 1, 1, 2, 2, 2])
    got = interval(a, b, rule)
    last = interval(a, b, Rule(alpha=rule.alpha * look_weights(2)[-1]))
    assert got is not None and last is not None
    assert math.isclose(got.delta_pct, last.delta_pct)  # all six rounds a side, not four
    assert (got.low_pct, got.high_pct) == pytest.approx((last.low_pct, last.high_pct))
    first = interval(Sample(a[:3], a.boots[:3]), Sample(b[:3], b.boots[:3]), DEFAULT_RULE)
    every = interval(a, b, DEFAULT_RULE)
    assert first is not None and every is not None
    w = look_weights(2)
    assert math.isclose(got.p_value, min(1.0, first.p_value / w[0], every.p_value / w[1]))


def _peek(rng: random.Random, rule: Rule, naive: bool) -> bool:
    """An A/A point that peeks after every round from 3 to 8 and stops at the first
    rejection: whether it (falsely) rejected."""
    b = [math.exp(rng.gauss(0, 0.01)) for _ in range(3)]
    a: list[float] = []
    for m in range(1, 9):
        a.append(math.exp(rng.gauss(0, 0.01)))
        if m < 3:
            continue
        iv = interval(a, b, DEFAULT_RULE if naive else rule)
        if iv is not None and iv.p_value <= rule.alpha:
            return True
    return False


def test_optional_stopping_keeps_alpha_where_the_naive_peek_does_not() -> None:
    rng = random.Random(11)
    trials = 500
    naive = sum(_peek(rng, SEQ, naive=True) for _ in range(trials)) / trials
    seq = sum(_peek(rng, SEQ, naive=False) for _ in range(trials)) / trials
    assert naive > 0.07  # peeking at a fixed α inflates it
    assert seq <= 0.05


def test_more_rounds_while_undecided_and_decidable() -> None:
    rival = [988.3, 988.6, 1006.7, 977.3, 998.6, 977.7, 1011.1, 1002.0]  # the leader, 8 rounds
    mine = [1015.0, 1005.0, 1025.0]  # +2.1 %: undecided after 3, reachable by 8
    why = more_rounds_to_decide(mine, {"b": rival}, True, SEQ, family=2)
    assert why is not None and why.startswith("undecided against b (")
    assert "after 3 round(s); sequential looks up to 8" in why
    # a rival torn down after 3 rounds: its own error keeps a 2 % gap out of reach at σ 1 %
    assert more_rounds_to_decide(mine, {"b": rival[:3]}, True, SEQ, family=2) is None
    # not sequential, before the planned rounds, at the cap: no round
    assert more_rounds_to_decide(mine, {"b": rival}, True, DEFAULT_RULE, 2) is None
    assert more_rounds_to_decide(mine[:2], {"b": rival}, True, SEQ, 2) is None
    assert more_rounds_to_decide(mine * 3, {"b": rival}, True, SEQ, 2) is None


def test_the_leader_gets_rounds_while_later_points_will_compare_with_it() -> None:
    mine = [1000.0, 1010.0, 990.0]
    why = more_rounds_to_decide(mine, {}, True, SEQ, family=2, later=4)
    assert why == ("leads after 3 round(s), and 4 point(s) still to measure will be compared "
                   "with it; sequential looks up to 8")
    assert more_rounds_to_decide(mine, {}, True, SEQ, family=2, later=0) is None
    # not the leader: a rival's estimate is better, the gap out of reach
    assert more_rounds_to_decide(mine, {"b": [1005.0, 1015.0, 995.0]}, True, SEQ, 2,
                                 later=4) is None


def test_no_round_when_decided_worse_or_out_of_reach() -> None:
    steady = [1000.0, 1000.5, 999.5]
    # clearly better: decided, nothing to add
    assert more_rounds_to_decide([1100.0, 1100.5, 1099.5], {"b": steady}, True, SEQ, 1) is None
    # clearly worse than one rival: it cannot be the answer, even if undecided against another
    wild = [900.0, 1100.0, 1000.0]
    assert more_rounds_to_decide([900.0, 900.4, 899.6], {"b": steady, "c": wild}, True, SEQ,
                                 2) is None
    # a rival torn down with two wild rounds: its error alone keeps the gap out of reach
    assert more_rounds_to_decide([1010.0, 1011.0, 1009.0], {"b": [800.0, 1250.0]}, True, SEQ,
                                 1) is None
    # fewer than two rival rounds: nothing to compare with
    assert more_rounds_to_decide([1010.0, 1011.0, 1009.0], {"b": [1000.0]}, True, SEQ, 1) is None


def test_lower_is_better_metric_direction() -> None:
    steady = [10.0, 10.005, 9.995]
    # higher TTFT is worse: shown worse stops the rounds
    assert more_rounds_to_decide([11.0, 11.005, 10.995], {"b": steady}, False, SEQ, 1) is None


@pytest.mark.parametrize("value", ["yes", 1])
def test_sequential_key_must_be_a_boolean(tmp_path: object, value: object) -> None:



    base = (REPO / "test_matrix" / "ppsweep.toml").read_text(encoding="utf-8")
    assert isinstance(tmp_path, Path)
    shutil.copy(REPO / "test_matrix" / "cluster.toml", tmp_path / "cluster.toml")
    good = tmp_path / "good.toml"
    good.write_text(base + "\n[compare]\nsequential = true\n", encoding="utf-8")
    assert load(good).compare_sequential is True
    bad = tmp_path / "bad.toml"
    bad.write_text(base + f"\n[compare]\nsequential = {value!r}\n".replace("'", '"'),
                   encoding="utf-8")
    with pytest.raises(MatrixError, match=r"compare\.sequential"):
        load(bad)
