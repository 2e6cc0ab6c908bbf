"""The long-work kill driver, with the browser plugin's recovery reads made a pause point.

Everything is ``_work_kill_driver``'s (fork a worker per command, count the phases of every
agent and house, pause at one); besides, with ``CHROME_PAUSE_RECOVER=before`` (or ``after``)
in a command's env, a worker says ``PID paused recover`` and sleeps before (after) its first
read of a publish target during reconciliation, so the test kills it in the middle of the
recovery reads.
"""

from __future__ import annotations

import os
import time
from typing import Any

import _work_kill_driver as driver
from comal.chrome import _recover

_reads = _recover._publish_reads


def _paused_reads(intent: Any) -> Any:
    where = os.environ.get("CHROME_PAUSE_RECOVER")
    if where == "before":
        driver.say(f"{os.getpid()} paused recover")
        time.sleep(120)
    seen = _reads(intent)
    if where == "after":
        driver.say(f"{os.getpid()} paused recover")
        time.sleep(120)
    return seen


_recover._publish_reads = _paused_reads

if __name__ == "__main__":
    driver.main()
