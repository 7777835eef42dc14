"""Whether a fitted profile may predict: a fit that cannot reproduce its own measured points is
a **misfit**, and then nothing shows its predictions (``fit``, ``plan``, the adaptive sweep, the
report's charts).

The rule lives in :meth:`.fitting.Fitted.misfits` (a measured median outside the 90 % interval
of the parameters' uncertainty plus a fixed model error, ``MISFIT_MODEL_ERROR``); the
fitted profile saves its result as ``misfit`` (``planner/profile.json``: one line per point and
metric, ``[]`` when trusted). :func:`fit_trust` is the one question every consumer asks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.planner.data import PlannerError
from pytest_ppsweep.planner.fitting import Fitted, fitted_from_json, load_fitted

__all__ = ["FitTrust", "fit_trust"]


@dataclass(frozen=True)
class FitTrust:
    """The verdict on a fitted profile: ``misfits`` names each measured point (and metric) the
    fit cannot reproduce, e.g. ``pp16-tp2-ep2 C=8: Input TPS measured 482, predicted 4,537
    [3,936, 5,229]``; empty when the fit can be trusted."""

    misfits: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        """True when the fit reproduces every point it was fitted to: its predictions may show."""
        return not self.misfits

    def summary(self) -> str:
        """One line for a terminal or a report."""
        if self.trusted:
            return "fit reproduces every measured point"
        points = sorted({m.split(":", 1)[0] for m in self.misfits})
        return (f"misfit: the fit cannot reproduce {len(points)} of its own measured point(s) "
                f"({'; '.join(points)}); no predictions are shown")


def fit_trust(profile: Fitted | Path | str | Mapping[str, Any]) -> FitTrust:
    """The trust of a fitted profile: a :class:`Fitted`, a ``profile.json`` path (or the run
    folder that holds ``planner/profile.json``), or that file's parsed JSON. A profile written
    before the ``misfit`` field existed is checked now."""
    if isinstance(profile, Fitted):
        return FitTrust(tuple(profile.misfits()))
    if isinstance(profile, Mapping):
        raw = profile.get("misfit")
        if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
            return FitTrust(tuple(raw))
        return FitTrust(tuple(fitted_from_json(dict(profile)).misfits()))
    path = Path(profile)
    if path.is_file():
        try:
            raw_json = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise PlannerError(f"{path}: expected JSON, found invalid text ({exc})") from None
        if isinstance(raw_json, dict) and isinstance(raw_json.get("misfit"), list):
            return fit_trust(raw_json)
    return FitTrust(tuple(load_fitted(path).misfits()))
