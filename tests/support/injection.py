"""Values with shell metacharacters for the injection tests, and a stub server that records the
argv and environment it was started with.

Every value, if a shell ever evaluated it, would create ``MARKER`` (a fresh path per session);
the tests assert that the marker never appears and that each value reached its process intact,
as one argument or one environment value."""

from __future__ import annotations

import uuid
from pathlib import Path

MARKER = Path(f"/tmp/pwned-{uuid.uuid4().hex}")
M = str(MARKER)

HOSTILE: dict[str, str] = {
    "semicolon": f"x; touch {M}",
    "command substitution": f"$(touch {M})",
    "backticks": f"`touch {M}`",
    "newline": f"x\ntouch {M}",
    "single quotes": f"'; touch {M}; '",
    "double quotes": f'"; touch {M}; "',
    "and-and + comment": f"&& touch {M} #",
    "pipe": f"| touch {M}",
    "redirect": f"> {M}",
    "backslash-quote": f"\\'; touch {M}; \\'",
    "expansions": "$HOME $PATH $((1+1)) * ? ~ !!",
    "leading dash": "--help",
    "tab and CR": f"a\tb\r; touch {M}",
    "unicode": f"é🙂\u202e; touch {M}",
}

# The stub server: ``python -m <module> ARGS`` writes its argv and environment as JSON to
# $INJECTION_DUMP and exits.
STUB_MODULE = "injectionstub"
STUB = '''
import json, os, sys
with open(os.environ["INJECTION_DUMP"], "w", encoding="utf-8") as f:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, f)
'''

# The same as ``python -c`` code that prints the JSON (remote hosts: no module to install).
PRINTER = (
    "import json, os, sys; "
    "print('DUMP ' + json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}), flush=True)"
)


def write_stub(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{STUB_MODULE}.py").write_text(STUB, encoding="utf-8")
    return folder
