"""The garbage collector of a long-running process: what it was built with at start-up is never scanned.

Python's full collections walk every tracked object in the oldest generation. In a serving process that is
mostly what it loaded at start-up (Django, the Temporal protos, grpc, the engine's modules), which never
becomes garbage, so each full collection cost `perdura api` 45-155 ms under a flood of calls: the event loop
stopped for as long, and every call in flight with it (bench/README.md, the noisy-neighbour section).
`gc.freeze()` moves what exists now to a permanent generation that collections skip (the practice the gc
module's documentation gives for this case); what the process allocates afterwards is collected as before.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Call once the process has loaded what it serves with, before it takes work."""
    gc.collect()  # start-up garbage goes now, not into the permanent generation
    gc.freeze()
