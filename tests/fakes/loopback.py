"""What both loopback fakes share: announce the port, then serve until told or timed out.

A fake binds 127.0.0.1 on a free port, writes that port to a file atomically (a test never
reads half a number), and stops by itself after its maximum lifetime even when a test dies
before stopping it.
"""

import os
import threading
from http.server import ThreadingHTTPServer


def write_port_file(server: ThreadingHTTPServer, path: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{server.server_address[1]}\n")
    os.replace(tmp, path)


def serve_for(server: ThreadingHTTPServer, seconds: float) -> None:
    timer = threading.Timer(max(0.0, seconds), server.shutdown)
    timer.daemon = True
    timer.start()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
