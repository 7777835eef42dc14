"""Step 9, what a person reads: the HTML summary and charts, the terminal summary, the pytest-html
table cells and the command line.
"""

from __future__ import annotations
