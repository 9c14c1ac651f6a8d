"""A stand-in for one process of a data-parallel server's job (scripts/lib-dp.sh, DP_SCRIPT): an engine
(`sglang serve …`, `vllm serve …`, linked under those names) or SMG's router (`python3 -m
smg.launch_router …`, through the python3 stub beside it). It records how it was started, then
answers HTTP on 127.0.0.1 at its --port until it is killed (600 s at most, a bound only a hang reaches).

    DP_RECORD    a JSONL file: one line per process started, {"role", "argv", "cuda", "pid"}
    DP_GATE_DIR  an engine answers GET /health 503 until the file <port> exists there (its weights
                 still loading: an event the test makes); without it, 200 at once
    DP_DIE_PORT  the engine of that port exits (code 3) as soon as it has recorded itself, or, once
                 the file <DP_GATE_DIR>/die-<port> appears, while it serves

The router answers GET /health 200, and GET /workers with its --worker-urls, each healthy, as SMG
lists workers.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
import time
from pathlib import Path

MAX_LIFETIME = 600


def port_of(argv: list[str]) -> int:
    return int(argv[argv.index("--port") + 1])


def main() -> None:
    # The wrappers say which program this is: --engine NAME (sglang, vllm) or --router.
    if sys.argv[1] == "--router":
        role, argv = "router", ["python3", "-m", "smg.launch_router", *sys.argv[2:]]
    else:
        role, argv = "engine", sys.argv[2:]
    port = port_of(argv)
    with open(os.environ["DP_RECORD"], "a", encoding="utf-8") as record:
        record.write(json.dumps({"role": role, "argv": argv, "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
                                 "pid": os.getpid()}) + "\n")
    gates = Path(os.environ["DP_GATE_DIR"]) if os.environ.get("DP_GATE_DIR") else None
    if role == "engine" and os.environ.get("DP_DIE_PORT") == str(port):
        sys.exit(3)
    workers = argv[argv.index("--worker-urls") + 1:] if role == "router" else []
    workers = workers[:next((i for i, w in enumerate(workers) if w.startswith("--")), len(workers))]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/health":
                ready = role == "router" or gates is None or (gates / str(port)).exists()
                self.send_response(200 if ready else 503)
                self.end_headers()
            elif self.path == "/workers" and role == "router":
                body = json.dumps({"workers": [{"url": w, "is_healthy": True} for w in workers]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.end_headers()

        def log_message(self, *_args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    end = time.monotonic() + MAX_LIFETIME
    while time.monotonic() < end:
        if role == "engine" and gates and (gates / f"die-{port}").exists():
            sys.exit(3)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
