"""Step 0b, the serving engine: what the plugin must know of the server it boots (its command
lines, flags, endpoints, log lines, server info and version), behind one Protocol, so that the
rest of the package names no engine's specifics. A new engine is one module here and its line
in ``engines.py``.
"""

from __future__ import annotations
