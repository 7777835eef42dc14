"""The acceptance suite of a sweep: every test here runs once per layout of ppsweep.toml.

The ppsweep plugin parametrises ``ppsweep_config`` (one booted service per layout, session
scope) and ``concurrency`` (c8, c16, …). Add your own checks as plain test functions that take
``ppsweep_service``.
"""
