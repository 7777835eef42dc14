"""The stash key of the plugin: the one owner object of a run (pytest's junitxml habit).

The owner, :class:`pytest_ppsweep.session.SweepSession`, sits above this module in the layering,
so the key is typed ``object`` here and read through the typed accessor
:meth:`SweepSession.of <pytest_ppsweep.session.SweepSession.of>`, which checks the type.
"""

from __future__ import annotations

import pytest

SESSION_KEY: pytest.StashKey[object] = pytest.StashKey()
