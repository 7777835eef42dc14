"""Prometheus text of SGLang's ``sglang:`` metrics (contract §5), in emulated seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
    600,
    1200,
    1800,
    2400,
)


@dataclass
class Histogram:
    """A cumulative Prometheus histogram."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        """Record one value."""
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        for i, le in enumerate(self.buckets):
            if value <= le:
                self.counts[i] += 1
        self.total += value
        self.n += 1


@dataclass
class Metrics:
    """Tokenizer-side counters and histograms of rank 0."""

    model_name: str
    prompt_tokens: int = 0
    generation_tokens: int = 0
    num_requests: int = 0
    aborted: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))

    def render(self, gauges: dict[str, float]) -> str:
        """The ``/metrics`` body."""
        lab = f'model_name="{self.model_name}"'
        out: list[str] = []

        def counter(name: str, help_text: str, value: float) -> None:
            out.append(f"# HELP sglang:{name} {help_text}")
            out.append(f"# TYPE sglang:{name} counter")
            out.append(f"sglang:{name}{{{lab}}} {float(value)}")

        counter("prompt_tokens_total", "Number of prefill tokens processed.", self.prompt_tokens)
        counter(
            "generation_tokens_total",
            "Number of generation tokens processed.",
            self.generation_tokens,
        )
        counter("cached_tokens_total", "Number of cached prompt tokens.", 0)
        counter("num_requests_total", "Number of requests processed.", self.num_requests)
        counter("num_aborted_requests_total", "Number of requests aborted.", self.aborted)
        for name, help_text, hist in (
            (
                "time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                self.ttft,
            ),
            (
                "e2e_request_latency_seconds",
                "Histogram of End-to-end request latency in seconds",
                self.e2e,
            ),
        ):
            out.append(f"# HELP sglang:{name} {help_text}")
            out.append(f"# TYPE sglang:{name} histogram")
            counts = hist.counts or [0] * len(hist.buckets)
            for le, c in zip(hist.buckets, counts, strict=True):
                out.append(f'sglang:{name}_bucket{{le="{float(le)}",{lab}}} {float(c)}')
            out.append(f'sglang:{name}_bucket{{le="+Inf",{lab}}} {float(hist.n)}')
            out.append(f"sglang:{name}_count{{{lab}}} {float(hist.n)}")
            out.append(f"sglang:{name}_sum{{{lab}}} {hist.total}")
        out.extend(render_gauges(gauges, self.model_name, pp_rank=0))
        return "\n".join(out) + "\n"


def render_gauges(gauges: dict[str, float], model_name: str, pp_rank: int) -> list[str]:
    """Scheduler-side gauges of one scheduler (TP0 of a stage)."""
    lab = f'engine_type="unified",model_name="{model_name}",pp_rank="{pp_rank}",tp_rank="0"'
    out: list[str] = []
    for name, value in gauges.items():
        out.append(f"# HELP sglang:{name} {name.replace('_', ' ')}.")
        out.append(f"# TYPE sglang:{name} gauge")
        out.append(f"sglang:{name}{{{lab}}} {float(value)}")
    return out
