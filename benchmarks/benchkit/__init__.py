"""Helpers of the benchmarks (results: all of them; the rest: bench_client_fidelity.py,
bench_client_capacity.py) and of tests/real/test_bench_serving_crosscheck.py.

Parent side (imported; benchmarks/ is the scripts' own folder and on pytest's ``pythonpath``):

* :mod:`benchkit.results` — the ``RESULT`` line every benchmark ends with, and ``--smoke``;
* :mod:`benchkit.stats` — percentiles, CPU seconds, load averages;
* :mod:`benchkit.provisioned` — the SGLang venv and tiny model of scripts/provision_sglang_cpu.sh;
* :mod:`benchkit.processes` — ports, readiness polls, stopping what we started, the zero server;
* :mod:`benchkit.bench_serving` — SGLang's bench_serving run through the launcher.
* :mod:`benchkit.chaos` — the chaos matrix's programs (a fault injected into a booted layout,
  what the plugin saw; bench_chaos.py and tests/reliability/test_chaos.py);
* :mod:`benchkit.interrupts` — interrupted sweeps at seeded moments (bench_interrupts.py and
  tests/reliability/test_interrupts.py). Both use the tests' helpers (``support``).

Child side (programs run by path by other interpreters, so standard library only at the top):

* ``benchkit/bench_serving_launcher.py`` — runs bench_serving in the SGLang venv, with
  observation-only hooks;
* ``benchkit/zero_server.py`` — a zero-delay SGLang stand-in (needs aiohttp).
"""
