"""A small HTTP service for Pier's process target: Python's standard
library only, so it runs on a fresh machine.

It listens on $PORT, answers / with a greeting (from $GREETING), /healthz
with "ok", and /env with the names of its variables (never their values).
It stops cleanly on SIGTERM, as Pier asks a process to stop.
"""

import http.server
import json
import os
import signal
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body are two writes: with Nagle's algorithm on, a
    # kept-alive connection's body waits for the client's delayed ACK of the
    # headers (about 40 ms on Linux) on every response.
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path == "/healthz":
            self.reply(200, "text/plain; charset=utf-8", b"ok\n")
        elif self.path == "/env":
            names = sorted(k for k in os.environ if k not in ("PATH", "HOME", "LANG", "PYTHONUNBUFFERED"))
            self.reply(200, "application/json", json.dumps({"variables": names}).encode())
        elif self.path == "/":
            greeting = os.environ.get("GREETING", "Hello from a Pier process")
            self.reply(200, "text/plain; charset=utf-8", (greeting + "\n").encode())
        else:
            self.reply(404, "text/plain; charset=utf-8", b"not found\n")

    def reply(self, status, ctype, body):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


def main():
    port = int(os.environ["PORT"])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        print("SIGTERM: finishing requests and stopping", flush=True)
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    server.serve_forever()
    print("stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
