"""Cost per million tokens from a GPU-hour's price (``[sweep] gpu_hour_usd``), the one place.

A layout of ``gpus`` GPUs at ``usd`` per GPU-hour costs ``gpus × usd / 3600`` dollars a second;
at ``tps`` tokens a second a million tokens cost ``gpus × usd / 3600 / tps × 10⁶``. Input and
output tokens are each charged the whole layout's time (as AIConfigurator and InferenceX state
cost per token of one kind), so the two are not to be added.
"""

from __future__ import annotations

import math

__all__ = ["per_million", "text"]


def per_million(tps: float | None, gpus: int, usd_per_gpu_hour: float | None) -> float | None:
    """Dollars per million tokens at ``tps`` tokens/s on ``gpus`` GPUs; None when unknown."""
    if usd_per_gpu_hour is None or tps is None or not math.isfinite(tps) or tps <= 0:
        return None
    return gpus * usd_per_gpu_hour / 3600.0 / tps * 1e6


def text(usd: float | None) -> str:
    """``$0.42/M tok`` (``n/a`` when unknown)."""
    return "n/a" if usd is None else f"${usd:,.3g}/M tok"
