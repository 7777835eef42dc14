"""PID 1 of the test suite's private half (scripts/test.sh): runs its command and reaps every
process that ends up its child, as an init does, until the command exits with its status.

In a new PID namespace the first process is its init: an orphan (a rank's child that left its
process group, a killed sweep's helper) is handed to it, and stays a zombie until it is reaped,
so ``kill -0`` would still find it. A shell as PID 1 reaps only its own jobs."""

import os
import subprocess
import sys

command = subprocess.Popen(sys.argv[1:])
while True:
    pid, status = os.waitpid(-1, 0)
    if pid == command.pid:
        sys.exit(os.waitstatus_to_exitcode(status))
