"""A loopback fake of the Harbor Hub (its Supabase project), for the real `harbor upload`.

Usage:
    python tests/fakes/fake_harbor_hub.py --record REQUESTS.jsonl --port-file PORT_FILE \
        --api-key-sha256 HEX [--leaderboard BOARD.json] [--max-lifetime 60]

Then point the real harbor (0.26.0) at it:
    HARBOR_SUPABASE_URL=http://127.0.0.1:$(cat PORT_FILE) HARBOR_SUPABASE_PUBLISHABLE_KEY=sb_publishable_fake
    HARBOR_API_KEY=sk-harbor-<id>_<secret>

harbor refuses to send credentials over http:// except to a loopback host
(harbor/auth/constants.py, assert_secure_supabase_url), so this fake binds 127.0.0.1 only, on a
free port it writes to PORT_FILE once listening, and exits by itself after --max-lifetime
seconds. It takes the API key's sha256, never the key: no argv of the test holds the key.

It serves what `harbor upload JOB_DIR` calls (harbor/cli/upload.py, upload/uploader.py,
upload/db_client.py, upload/storage.py, storage/resumable.py, auth/tokens.py), and what make
submit's Hub check reads with the same client (tools/hub/submit.py hub-check: UploadDB.get_job, a
select of the job row by id, and list_trials_for_job, the trial rows whose job_id is the job's):

    POST  /functions/v1/api-key-exchange    {"api_key": ...} -> a JWT (sub = the user id); 401
                                            unless the key's sha256 is --api-key-sha256
    POST  /rest/v1/rpc/list_my_orgs         the user's personal org
    GET   /rest/v1/<table>?<col>=eq.<v>     PostgREST select with eq filters (job, trial)
    POST  /rest/v1/<table>[?on_conflict=]   insert or upsert (job, agent, model, trial,
                                            trial_model): the rows, with an id when missing
    PATCH /rest/v1/<table>?id=eq.<v>        update (job finalize, trial artifacts)
    POST  /storage/v1/object/results/<p>    a small file (job.log)
    POST  /storage/v1/upload/resumable      TUS create: Location /storage/v1/upload/resumable/<n>
    PATCH /storage/v1/upload/resumable/<n>  TUS chunk; HEAD answers the offset
    POST  /functions/v1/leaderboard-read    the leaderboard (harbor/hub/leaderboards.py LeaderboardClient.get,
                                            what `harbor hub leaderboard show` prints): --leaderboard's JSON,
                                            else 404 {"error": {"code": "not_found"}}

Every call but the exchange must carry "Authorization: Bearer <the JWT it handed out>", else
401. Anything else answers 404. Every request is appended to --record as one JSON line:
    {"method", "path", "query", "auth": "jwt" | "publishable" | "none" | "other",
     "apikey_header": bool, "body": parsed JSON or {"bytes": N}, "at"}
The exchange's body is recorded as {"api_key_sha256": ...}: no file this fake writes holds the
key. When a TUS upload or a stored object completes, one more line records what it held:
    {"event": "object", "name": "trials/<id>/trial.tar.gz", "bytes": N,
     "members": [every member of the tar.gz, when it is one]}
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import io
import json
import re
import tarfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.loopback import serve_for, write_port_file

USER_ID = "00000000-0000-4000-8000-00000000a11c"
PERSONAL_ORG = {"id": "00000000-0000-4000-8000-0000000000e1", "name": "alice", "display_name": "alice",
                "kind": "personal", "role": "owner"}
TUS = re.compile(r"^/storage/v1/upload/resumable/(?P<n>[0-9]+)$")
OBJECT = re.compile(r"^/storage/v1/object/(?P<bucket>[^/]+)/(?P<name>.+)$")
TABLE = re.compile(r"^/rest/v1/(?P<table>[a-z_]+)$")
RPC = re.compile(r"^/rest/v1/rpc/(?P<fn>[a-z_]+)$")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(sub: str) -> str:
    """An HS256 JWT, as Supabase mints: harbor decodes it unverified for its sub."""
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps({"sub": sub, "role": "authenticated", "exp": int(time.time()) + 900}).encode())
    sig = b64url(hmac.new(b"fake-harbor-hub", f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{sig}"


def tar_members(data: bytes) -> list[str] | None:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            return sorted(m.name + ("/" if m.isdir() else "") for m in tar.getmembers())
    except (tarfile.TarError, OSError, EOFError):
        return None


class FakeHarborHub:
    def __init__(self, record: str | None, key_sha256: str, leaderboard: dict | None = None):
        self.record_path = record
        self.key_sha256 = key_sha256
        self.leaderboard = leaderboard
        self.jwt = make_jwt(USER_ID)
        self.lock = threading.Lock()
        self.tables: dict[str, list[dict]] = {}
        self.uploads: dict[str, dict] = {}  # TUS uploads: n -> {name, length, data}

    def record(self, entry: dict) -> None:
        if not self.record_path:
            return
        with self.lock, open(self.record_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")

    def stored(self, name: str, data: bytes) -> None:
        self.record({"event": "object", "name": name, "bytes": len(data), "members": tar_members(data),
                     "at": time.time()})

    # --- PostgREST, just enough -------------------------------------------------------------

    @staticmethod
    def eq_filters(query: dict) -> dict[str, str]:
        return {k: v[0][3:] for k, v in query.items() if v and v[0].startswith("eq.")}

    def select(self, table: str, query: dict) -> list[dict]:
        wanted = self.eq_filters(query)
        with self.lock:
            return [dict(r) for r in self.tables.get(table, [])
                    if all(str(r.get(k)) == v for k, v in wanted.items())]

    def insert(self, table: str, body, query: dict, prefer: str) -> list[dict]:
        rows = body if isinstance(body, list) else [body]
        conflict = [c for c in (query.get("on_conflict", [""])[0]).split(",") if c]
        out = []
        with self.lock:
            existing = self.tables.setdefault(table, [])
            for row in rows:
                keys = [c for c in conflict if c in row]
                match = next((r for r in existing if keys and all(r.get(c) == row[c] for c in keys)), None)
                if match is not None:
                    if "ignore-duplicates" in prefer:
                        continue
                    match.update(row)
                    out.append(dict(match))
                    continue
                new = {"id": str(uuid.uuid4()), **row}
                existing.append(new)
                out.append(dict(new))
        return out

    def update(self, table: str, body: dict, query: dict) -> list[dict]:
        wanted = self.eq_filters(query)
        out = []
        with self.lock:
            for r in self.tables.get(table, []):
                if all(str(r.get(k)) == v for k, v in wanted.items()):
                    r.update(body)
                    out.append(dict(r))
        return out


class Handler(BaseHTTPRequestHandler):
    hub: FakeHarborHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _auth(self) -> str:
        value = self.headers.get("Authorization") or ""
        if value == f"Bearer {self.hub.jwt}":
            return "jwt"
        if not value:
            return "none"
        return "publishable" if value.startswith("Bearer sb_publishable") else "other"

    def _send(self, status: int, payload=None, headers: dict | None = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        raw = self._body()
        entry = {"method": self.command, "path": path, "query": query, "auth": self._auth(),
                 "apikey_header": "apikey" in self.headers, "at": time.time()}
        try:
            body = json.loads(raw) if raw and not path.startswith("/storage/") else None
        except ValueError:
            body = None
        if path == "/functions/v1/api-key-exchange" and self.command == "POST":
            key = (body or {}).get("api_key", "")
            digest = hashlib.sha256(key.encode()).hexdigest()
            entry["body"] = {"api_key_sha256": digest}
            self.hub.record(entry)
            if digest != self.hub.key_sha256:
                return self._send(401, {"error": "invalid api key"})
            return self._send(200, {"access_token": self.hub.jwt, "expires_in": 900})
        entry["body"] = body if body is not None else {"bytes": len(raw)}
        self.hub.record(entry)
        if entry["auth"] != "jwt":
            return self._send(401, {"message": "JWT required", "code": "PGRST302"})
        self._route(path, query, body, raw)

    def _route(self, path: str, query: dict, body, raw: bytes) -> None:
        hub = self.hub
        if path == "/functions/v1/leaderboard-read" and self.command == "POST":
            if hub.leaderboard is None:
                return self._send(404, {"error": {"message": "leaderboard not found", "code": "not_found"}})
            return self._send(200, hub.leaderboard)
        if (m := RPC.match(path)) and self.command == "POST":
            if m["fn"] == "list_my_orgs":
                return self._send(200, [PERSONAL_ORG])
            return self._send(404, {"message": f"no function {m['fn']}", "code": "PGRST202"})
        if m := TABLE.match(path):
            table = m["table"]
            if self.command == "GET":
                return self._send(200, hub.select(table, query))
            if self.command == "POST":
                rows = hub.insert(table, body, query, self.headers.get("Prefer") or "")
                return self._send(201, rows)
            if self.command == "PATCH":
                return self._send(200, hub.update(table, body or {}, query))
        if path == "/storage/v1/upload/resumable" and self.command == "POST":
            meta = dict(part.split(" ", 1) for part in (self.headers.get("Upload-Metadata") or "").split(",") if " " in part)
            meta = {k: base64.b64decode(v).decode() for k, v in meta.items()}
            with hub.lock:
                n = str(len(hub.uploads) + 1)
                hub.uploads[n] = {"name": meta.get("objectName", ""), "length": int(self.headers["Upload-Length"]),
                                  "data": bytearray()}
            return self._send(201, None, {"Location": f"/storage/v1/upload/resumable/{n}", "Tus-Resumable": "1.0.0"})
        if (m := TUS.match(path)) and m["n"] in hub.uploads:
            up = hub.uploads[m["n"]]
            if self.command == "HEAD":
                return self._send(200, None, {"Upload-Offset": str(len(up["data"]))})
            if self.command == "PATCH":
                if int(self.headers.get("Upload-Offset") or -1) != len(up["data"]):
                    return self._send(409, {"message": "offset mismatch"})
                up["data"].extend(raw)
                if len(up["data"]) >= up["length"]:
                    hub.stored(up["name"], bytes(up["data"]))
                return self._send(204, None, {"Upload-Offset": str(len(up["data"])), "Tus-Resumable": "1.0.0"})
        if (m := OBJECT.match(path)) and self.command in ("POST", "PUT"):
            hub.stored(m["name"], raw)
            return self._send(200, {"Key": f"{m['bucket']}/{m['name']}", "Id": str(uuid.uuid4())})
        self._send(404, {"message": f"not served by the fake: {self.command} {path}"})

    do_GET = do_POST = do_PATCH = do_PUT = do_HEAD = do_DELETE = _handle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", help="append every request to this JSONL file")
    parser.add_argument("--port-file", required=True, help="write the listening port here")
    parser.add_argument("--api-key-sha256", required=True, help="sha256 (hex) of the only API key accepted")
    parser.add_argument("--leaderboard", help="a JSON file: the leaderboard-read answer (its metadata_schema, ...)")
    parser.add_argument("--max-lifetime", type=float, default=60.0, help="exit after this many seconds")
    args = parser.parse_args()
    board = json.loads(open(args.leaderboard, encoding="utf-8").read()) if args.leaderboard else None
    Handler.hub = FakeHarborHub(args.record, args.api_key_sha256, board)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    write_port_file(server, args.port_file)
    serve_for(server, args.max_lifetime)


if __name__ == "__main__":
    main()
