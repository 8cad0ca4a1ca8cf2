"""A background worker for Pier's worker target: no HTTP, just work.

Every $INTERVAL seconds (default 5) it does a unit of work and logs a
line; it stops cleanly on SIGTERM.
"""

import os
import signal
import sys
import time

running = True


def stop(signum, frame):
    global running
    running = False


def main():
    signal.signal(signal.SIGTERM, stop)
    interval = float(os.environ.get("INTERVAL", "5"))
    n = 0
    print("worker started", flush=True)
    while running:
        n += 1
        print(f"tick {n}", flush=True)
        deadline = time.monotonic() + interval
        while running and time.monotonic() < deadline:
            time.sleep(0.1)
    print(f"worker stopped after {n} ticks", flush=True)


if __name__ == "__main__":
    sys.exit(main())
