"""The flag check's probe for an engine whose server parses its command line with ``argparse``
(SGLang's ``prepare_server_args``, the emulator's ``build_parser``): :data:`ARGS_SCRIPT` runs
``python -m <server_module> --help`` with ``argparse`` intercepted, so the first parser that is
asked to parse is dumped as JSON and the process exits before anything is loaded or started
(cluster/serverflags.py reads the dump back and checks the sweep against it).
"""

from __future__ import annotations

MARKER = "PPSWEEP_SERVER_FLAGS "
# Run as ``python -c ARGS_SCRIPT <module>``: the first parser with long options that parses is
# dumped (option strings, choices, whether it takes a value) and the process ends at once.
ARGS_SCRIPT = r"""
import argparse, importlib.util, json, os, runpy, sys
module = sys.argv[1]
try:
    found = importlib.util.find_spec(module) is not None
except Exception:
    found = False
if not found:
    sys.exit(3)
original = argparse.ArgumentParser.parse_known_args
def dump(self, args=None, namespace=None):
    acts = [a for a in self._actions if a.option_strings]
    if sum(1 for a in acts if not isinstance(a, argparse._HelpAction)) < 3:
        return original(self, args, namespace)
    out = []
    for a in acts:
        choices = None
        if a.choices is not None:
            try:
                choices = [str(c) for c in list(a.choices)[:500]]
            except TypeError:
                choices = None
        out.append({"flags": list(a.option_strings), "choices": choices,
                    "takes_value": a.nargs != 0})
    sys.stdout.write("PPSWEEP_SERVER_FLAGS " + json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)
argparse.ArgumentParser.parse_known_args = dump
sys.argv = [module, "--help"]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except BaseException:
    pass
os._exit(4)
"""
# Exit statuses of ARGS_SCRIPT: the dump was printed; the module is not importable; it is, but
# it parsed no arguments this way (no list, no check).
DUMPED, NOT_IMPORTABLE, NO_PARSER = 0, 3, 4
