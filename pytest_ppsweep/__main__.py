"""``python -m pytest_ppsweep runs|show|report|compare …`` (:mod:`pytest_ppsweep.report.cli`)."""

from __future__ import annotations

import sys

from pytest_ppsweep.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
