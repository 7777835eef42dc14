"""Print every option of `vllm serve`, one per line, from vLLM's own argument parser.

Run with the vLLM venv's Python. Each line is the option strings of one argument separated by
spaces (e.g. ``--tensor-parallel-size -tp``); a flag check accepts a flag found on any line.
This is the parser `vllm serve` itself builds (vllm/entrypoints/cli/serve.py subparser_init).
"""

import sys

from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.version import __version__

parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
lines = sorted(" ".join(a.option_strings) for a in parser._actions if a.option_strings)
print(f"# vllm {__version__}: options of `vllm serve` ({len(lines)})")
sys.stdout.write("\n".join(lines) + "\n")
