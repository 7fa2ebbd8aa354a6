"""lineage-bench's Python figure: Client.run(["true"]) against
subprocess.run(["true"]), interleaved, medians in seconds, as JSON."""

import json
import statistics
import subprocess
import sys
import time

from lineage_client import Client

socket, lineage, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = Client(socket=socket, lineage=lineage)
session = "bench-python-run"
c.run(["true"], session=session, kind="autonomous")  # the session is known, the binary found
base, ours = [], []
for i in range(rounds):
    t = time.perf_counter()
    subprocess.run(["true"])
    base.append(time.perf_counter() - t)
    t = time.perf_counter()
    c.run(["true"], session=session)
    ours.append(time.perf_counter() - t)
    if i % 100 == 99:
        c.turn_end(session)  # forgets the exited roots, out of the timing
c.session_close(session)
print(json.dumps({"subprocess": statistics.median(base), "client": statistics.median(ours), "rounds": rounds}))
