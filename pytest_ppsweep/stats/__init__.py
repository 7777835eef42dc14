"""The statistics the plugin decides with, in one place: pure functions on numbers and arrays,
one module per method. Nothing here reads a run folder, a sweep file or a Config, and nothing
here imports a step of the flow: the steps import from here (measure/, results/, gate/, run/,
report/), and the code that wires a method to run data stays in the step that owns that data.

* decision.py    the decision test between two points: Welch's t-interval on log values, TOST
                 equivalence, Holm's step-down over a question, sequential looks (α spent by a
                 Bonferroni bound), rounds within boots (the boot as the unit); its
                 parameters as a Rule (read from run.json by results/rule.py)
* power.py       the repeats, or boots × rounds per boot, that separate a gap with a stated
                 power under that test (an answer's rerun advice)
* studentt.py    Student's t: survival function and quantiles (no scipy)
* spread.py      the spread rule: how far a point's repeats disagree, and whether a booted
                 layout runs one more round
* bootnoise.py   the boot-to-boot variance pooled over earlier runs of unchanged configurations
                 (each run one boot; the run history wires it to a cluster, image and engine)
* gatenoise.py   the gate's calibrated noise rule between two runs (5 × the median distance of
                 a repeat from its run's median); why the gate keeps it rather than the
                 decision test is in its docstring
* binomial.py    bounds of a share: Clopper-Pearson (an SLO percentile proven), the fewest
                 trials that prove one, batch-means dispersion, Wilson's interval
* accuracytest.py the accuracy check: questions for θ/α/β and the one-sided threshold of a
                 score against a reference score
* capacity.py    the SLO capacity as an interval: a logistic fit of the share over a limit
                 against log load, Fieller's interval, the ratio of two capacities (MOVER)
* md1queue.py    the M/D/1 queue model that sizes an SLO probe (its empty start's bias)

A new statistic is a module here (named by its method, with its tests in tests/stats/ and,
where it states an error rate, a benchmark in benchmarks/ that measures it); its caller wires
it to the run's data.
"""

from __future__ import annotations
