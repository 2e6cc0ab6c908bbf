"""Child process for the SIGKILL fault test: appends steps forever until killed."""

from __future__ import annotations

import random
import sys

from comal.ledger import Scope, open_ledger
from comal.messages import Message, ToolCall
from comal.tokens import EstimatingCounter


def main() -> None:
    path, tenant, agent, session, seed = sys.argv[1:6]
    rng = random.Random(int(seed))
    led = open_ledger(path, counter=EstimatingCounter())
    scope = Scope(tenant, agent, session)
    print("ready", flush=True)
    i = 0
    while True:
        n = rng.randint(1, 4)
        calls = [ToolCall(f"s{seed}-{i}-{k}", "Bash", '{"command": "ls"}') for k in range(n)]
        msgs = [Message.assistant(f"step {i}", *calls)]
        msgs += [Message.tool(c.id, "z" * rng.randint(200, 20_000)) for c in calls]
        led.append(scope, msgs)
        if i == 0:
            # One step is committed: the test's kill lands while the next ones are written,
            # whatever the machine's load (a fixed sleep measured nothing on a busy one).
            print("wrote", flush=True)
        i += 1


if __name__ == "__main__":
    main()
