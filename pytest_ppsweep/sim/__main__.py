"""``python3 -m pytest_ppsweep.sim <sglang.launch_server args>``: run one emulated node rank."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .launch.serverargs import parse_args


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, resolve and run; returns the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(args_list)  # exits 2 like argparse on unknown flags
    # Imported after the arguments are parsed, as SGLang's launch_server parses before it
    # loads the engine: reading the parser (preflight's flag check, --help) stays cheap.
    from .launch.config import LaunchError, resolve
    from .launch.faults import FaultSpecError
    from .launch.settings import load_settings
    from .model.profile import load_profile
    from .rank.main import run_rank

    try:
        settings = load_settings()
        profile = load_profile(settings.profile)
    except (FaultSpecError, ValueError, OSError) as exc:
        sys.stderr.write(f"ppsweep-sim: bad emulator environment: {exc}\n")
        return 2
    try:
        cfg = resolve(args, tuple(args_list), settings, profile)
    except LaunchError as exc:
        sys.stderr.write(exc.text + "\n")
        sys.stderr.flush()
        return 1
    return run_rank(cfg)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # do not wait for lingering executor threads: exit promptly
