"""A loopback fake of the few Hub endpoints make publish uses, for the real huggingface_hub client.

Usage:
    python tests/fakes/fake_hub.py --record REQUESTS.jsonl --port-file PORT_FILE \
        [--max-lifetime 60] [--token hf_...] [--fail-commit]

Then point the real client at it: HF_ENDPOINT=http://127.0.0.1:$(cat PORT_FILE) HF_TOKEN=hf_...

It binds 127.0.0.1 on a free port, writes the port to PORT_FILE once it is listening, and exits
by itself after --max-lifetime seconds. It serves exactly what huggingface_hub 2.4.0 calls for
`HfApi.create_commit(..., create_pr=True)` with one small file (hf_api.py, _commit_api.py):

    POST /api/models/{ns}/{name}/preupload/{revision}   every file "regular" (no LFS, no xet)
    POST /api/models/{ns}/{name}/commit/{revision}      the commit (NDJSON: a header line, then
                                                        one line per file, base64 content);
                                                        answers commitUrl, commitOid and, with
                                                        ?create_pr=1, pullRequestUrl

and for `HfApi.model_info(repo, expand=["evalResults"])` (hf_api.py, model_info; ModelInfo parses
"evalResults" with parse_eval_result_entries):

    GET  /api/models/{ns}/{name}                        {"id", "evalResults"}: the entries of every
                                                        .eval_results/*.yaml committed here, read as
                                                        the Hub reads them (a YAML list); with
                                                        --no-parse, none (the Hub has not parsed it yet)

and for `HfApi.batch_bucket_files(bucket, add=[...])` (hf_api.py, _batch_bucket_files):

    GET  /api/buckets/{ns}/{name}/xet-write-token       the xet CAS's URL (this fake) and a token
    GET  /v1/chunks/...                                 global dedup query: 404 (nothing known)
    POST /v1/xorb-grants/..., /v2/shards                404: hf_xet (1.8.0) then falls back to
                                                        the v1 uploads below (v2 shards answer
                                                        NDJSON progress frames, not spoken here)
    POST /v1/xorbs/...                                  xet's CAS: content blocks, accepted
    POST /v1/shards, /shards                            xet's CAS: the file index, accepted
    POST /v1/telemetry                                  hf_xet's transfer summary, accepted
    POST /api/buckets/{ns}/{name}/batch                 NDJSON addFile lines: recorded, 200

Anything else answers 404 and is recorded, so a test sees every call the client made. With
--token, a request whose Authorization is not "Bearer <token>" answers 401 (the CAS is called
with the xet token this fake handed out). --fail-commit answers the commit with 403.

Every request is appended to the --record file as one JSON line:
    {"method": "POST", "path": "/api/models/Qwen/M/commit/main", "query": {"create_pr": ["1"]},
     "auth": true, "body": ..., "at": 1767225600.25}
"body" is the parsed JSON, or for NDJSON the list of parsed lines with each file's base64
content decoded into "text" (UTF-8), or for the CAS only {"bytes": N}. "auth" says whether an
Authorization header came; the header's value is never recorded.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from tests.fakes.loopback import serve_for, write_port_file

MODEL = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)$")
PREUPLOAD = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/preupload/(?P<rev>[^/]+)$")
COMMIT = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/commit/(?P<rev>[^/]+)$")
XET_TOKEN = re.compile(r"^/api/buckets/(?P<bucket>[^/]+/[^/]+)/xet-write-token$")
BATCH = re.compile(r"^/api/buckets/(?P<bucket>[^/]+/[^/]+)/batch$")
CAS = re.compile(r"^/v[0-9]+/")  # xet's CAS API, versioned
XET_TOKEN_VALUE = "xet-fake-token"


def decode_ndjson(raw: bytes) -> list:
    lines = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        value = item.get("value") if isinstance(item, dict) else None
        if isinstance(value, dict) and value.get("encoding") == "base64" and "content" in value:
            value = {k: v for k, v in value.items() if k != "content"}
            value["text"] = base64.b64decode(item["value"]["content"]).decode("utf-8", errors="replace")
            item = {**item, "value": value}
        lines.append(item)
    return lines


class FakeHub:
    def __init__(self, record_path: str | None, token: str | None, fail_commit: bool, parse: bool = True):
        self.record_path = record_path
        self.token = token
        self.fail_commit = fail_commit
        self.parse = parse
        self.lock = threading.Lock()
        self.commits = 0
        self.eval_results: dict[str, list] = {}  # repo -> entries of its committed .eval_results files

    def committed(self, repo: str, lines: list) -> None:
        """Keep the entries of each .eval_results/*.yaml a commit adds, as the Hub would parse them."""
        for line in lines:
            value = line.get("value") if isinstance(line, dict) else None
            if line.get("key") == "file" and isinstance(value, dict) and \
                    str(value.get("path", "")).startswith(".eval_results/") and "text" in value:
                entries = yaml.safe_load(value["text"])
                with self.lock:
                    self.eval_results.setdefault(repo, []).extend(entries if isinstance(entries, list) else [])

    def record(self, entry: dict) -> None:
        if not self.record_path:
            return
        with self.lock, open(self.record_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({**entry, "at": time.time()}) + "\n")


class Handler(BaseHTTPRequestHandler):
    hub: FakeHub  # set on the class by main()
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # the JSONL record is the log

    def _reply(self, code: int, payload=None, headers: dict | None = None):
        body = json.dumps(payload if payload is not None else {}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if code >= 400 and isinstance(payload, dict) and "error" in payload:
            self.send_header("X-Error-Message", payload["error"])
        self.end_headers()
        self.wfile.write(body)

    def _body(self, path: str) -> tuple[bytes, object]:
        raw = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
        if not raw:
            return raw, None
        if CAS.match(path):
            return raw, {"bytes": len(raw)}
        if "ndjson" in (self.headers.get("Content-Type") or "") or COMMIT.match(path):
            try:
                return raw, decode_ndjson(raw)
            except ValueError:
                return raw, raw.decode(errors="replace")
        try:
            return raw, json.loads(raw)
        except ValueError:
            return raw, raw.decode(errors="replace")

    def _authorized(self, path: str) -> bool:
        if self.hub.token is None:
            return True
        expected = XET_TOKEN_VALUE if CAS.match(path) or path == "/shards" else self.hub.token
        return self.headers.get("Authorization") == f"Bearer {expected}"

    def _handle(self, method: str):
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        _, body = self._body(path)
        hub = self.hub
        hub.record({"method": method, "path": path, "query": query,
                    "auth": bool(self.headers.get("Authorization")), "body": body})
        if not self._authorized(path):
            return self._reply(401, {"error": "Invalid credentials in Authorization header"})
        endpoint = f"http://{self.headers.get('Host')}"

        if method == "POST" and (m := PREUPLOAD.match(path)):
            files = (body or {}).get("files", []) if isinstance(body, dict) else []
            return self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                                                "oid": None} for f in files],
                                     "commitOid": "0" * 40})
        if method == "POST" and (m := COMMIT.match(path)):
            if hub.fail_commit:
                return self._reply(403, {"error": "You don't have the rights to create a pull request"})
            hub.committed(m["repo"], body if isinstance(body, list) else [])
            with hub.lock:
                hub.commits += 1
                n = hub.commits
            oid = f"{n:040x}"
            reply = {"success": True, "commitOid": oid, "commitUrl": f"{endpoint}/{m['repo']}/commit/{oid}"}
            if query.get("create_pr") == ["1"]:
                reply["pullRequestUrl"] = f"{endpoint}/{m['repo']}/discussions/{n}"
            return self._reply(200, reply)
        if method == "GET" and (m := MODEL.match(path)):
            with hub.lock:
                entries = list(hub.eval_results.get(m["repo"], [])) if hub.parse else []
            return self._reply(200, {"id": m["repo"], "modelId": m["repo"], "evalResults": entries})
        if method == "GET" and XET_TOKEN.match(path):
            info = {"casUrl": endpoint, "accessToken": XET_TOKEN_VALUE, "exp": int(time.time()) + 3600}
            return self._reply(200, info, headers={"X-Xet-Cas-Url": endpoint, "X-Xet-Access-Token": XET_TOKEN_VALUE,
                                                   "X-Xet-Token-Expiration": str(info["exp"])})
        if CAS.match(path) or path == "/shards":
            if method == "GET" or path.startswith(("/v2/", "/v1/xorb-grants/")):
                # Nothing known for dedup; v2 shards (NDJSON progress frames) and xorb grants are
                # not spoken here: a 404 makes hf_xet fall back to the v1 uploads below.
                return self._reply(404, {"error": "not found"})
            if path.endswith("/telemetry"):
                return self._reply(200, {})
            if "shard" in path:
                return self._reply(200, {"result": 1})  # 1: SyncPerformed (the shard is new)
            return self._reply(200, {"was_inserted": True})
        if method == "POST" and BATCH.match(path):
            return self._reply(200, {"failed": []})
        return self._reply(404, {"error": f"no such route {method} {path}"})

    def do_GET(self):  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def do_PUT(self):  # noqa: N802
        self._handle("PUT")

    def do_HEAD(self):  # noqa: N802
        self._handle("HEAD")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", help="append every request to this JSONL file")
    parser.add_argument("--port-file", required=True, help="write the listening port here")
    parser.add_argument("--max-lifetime", type=float, default=60.0, help="exit after this many seconds")
    parser.add_argument("--token", default=None, help="accept only this bearer token")
    parser.add_argument("--fail-commit", action="store_true", help="answer the commit with 403")
    parser.add_argument("--no-parse", action="store_true", help="list no eval results (not parsed yet)")
    args = parser.parse_args()
    Handler.hub = FakeHub(args.record, args.token, args.fail_commit, parse=not args.no_parse)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    write_port_file(server, args.port_file)
    serve_for(server, args.max_lifetime)


if __name__ == "__main__":
    main()
