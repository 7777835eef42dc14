"""``python -m pytest_ppsweep.profile TRACE_OR_FOLDER…``: the attribution of traces, standalone.

Prints one line per rank and the layout's medians as JSON; exit status 2 on a trace that cannot
be parsed (the message names the file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .attribution import aggregate
from .trace import TraceError, parse, trace_files

__all__: list[str] = []


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    paths: list[Path] = []
    for arg in argv:
        p = Path(arg)
        paths.extend(trace_files(p) if p.is_dir() else [p])
    try:
        ranks = [parse(p) for p in paths]
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for r in ranks:
        print(
            f"{r.rank:>14} {r.source} window {r.window_ms:9.1f} ms | "
            + ", ".join(f"{k} {r.calls[k]} × p50 {r.p50_ms[k]:.3f} = {r.cumulative_ms[k]:.1f} ms"
                        for k in r.calls)
            + f" | compute {r.compute_calls} {'kernels' if r.source == 'gpu' else 'ops'}"
            f" {r.compute_ms:.3f} ms"
            + f" | exposed {r.share(r.exposed_ms):.1%} overlap {r.overlap_ratio:.1%}"
        )
    lp = aggregate("traces", ranks)
    summary = {k: v for k, v in lp.as_dict().items() if k != "per_rank"}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
