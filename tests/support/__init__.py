"""Plain helpers of the plugin's own tests, one module per kind of thing.

``tests/`` is on pytest's ``pythonpath`` (``[tool.pytest.ini_options]`` in pyproject.toml), so a
test module or conftest of any folder does ``from support.runs import …``. Fixtures stay in the
conftest.py files; these modules hold no fixtures.

* :mod:`support.paths` — where the repository, the seed matrix and tests/data are;
* :mod:`support.runs` — run folders: reading them, and the synthetic-run factory;
* :mod:`support.matrices` — sweep-file (``ppsweep.toml``) text for the emulated clusters, the
  seed sweep as one self-contained file (``seed_text``) and edits of it that fail loudly when
  their target is gone (``replace_once``);
* :mod:`support.processes` — bounded waits and /proc lookups;
* :mod:`support.outcomes` — what a pytester run printed;
* :mod:`support.fakes` — a fake SGLang server for the load-generator tests;
* :mod:`support.sim` — emulator processes on loopback: ports, HTTP, SSE;
* :mod:`support.real` — real SGLang on CPU: provisioning, sweep folders, its processes;
* :mod:`support.conformance` — one PP2 service, real or emulated, for the conformance tests;
* :mod:`support.remote` — the namespace test hosts of the remote backends;
* :mod:`support.browser` — Chromium and what a report page shows.
"""
