"""Step 2, the nodes: hosts and launchers (local, ssh, ssh-process, docker), the rank command
(rankspec), labels, preflight, node info and reaping of leftovers.
"""

from __future__ import annotations
