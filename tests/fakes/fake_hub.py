"""A loopback fake of the few Hub endpoints make publish and make watch use, for the real huggingface_hub client.

Usage:
    python tests/fakes/fake_hub.py --record REQUESTS.jsonl --port-file PORT_FILE \
        [--max-lifetime 60] [--token hf_...] [--fail-commit] [--bucket NS/NAME=DIR ...]

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

and, for each --bucket NS/NAME=DIR (DIR served read-only as the bucket's files; a symlink in it is
never followed nor listed), what `HfApi.list_bucket_tree` and `HfApi.download_bucket_files` call
(hf_api.py; the download goes through hf_xet 1.8.0's reconstruction, spoken here with one
uncompressed chunk per 64 KiB of a file):

    GET  /api/buckets/{ns}/{name}/tree[/{prefix}]       the listing: {"type": "file", "path", "size",
                                                        "xetHash", "mtime"} and {"type": "directory",
                                                        "path"}; ?recursive=True for the whole subtree
    POST /api/buckets/{ns}/{name}/paths-info            the same entries of the paths asked for
    HEAD /buckets/{ns}/{name}/resolve/{path}            X-Xet-Hash, X-Xet-Refresh-Route, Content-Length
    GET  /buckets/{ns}/{name}/resolve/{path}            the file's bytes
    GET  /api/buckets/{ns}/{name}/xet-read-token        the xet CAS's URL (this fake) and a token
    GET  /v2/reconstructions/{hash}                     501: hf_xet falls back to v1, as with the Hub
    GET  /v1/reconstructions/{hash}                     the file's terms: one xorb of its chunks
    GET  /xorbs/{hash}                                  that xorb's bytes (the presigned URL: no auth),
                                                        the Range asked for (206)

and for `HfApi.list_repo_tree(repo, repo_type="dataset", revision=REV, recursive=True)` (hf_api.py,
_iter_repo_tree_pages), of a --dataset served from a dir (make bench's N_SHARDS lists its tasks so):

    GET  /api/datasets/{ns}/{name}/tree/{rev}[/{path}]  {"type": "file", "oid", "size", "path"} and
                                                        {"type": "directory", "oid", "path"}, one page;
                                                        another revision: 404 (RevisionNotFound)

Requests that read a bucket file's content (resolve, reconstructions, xorbs) are recorded with
"file": "NS/NAME/PATH", so a test sees exactly which files were read.

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
import hashlib
import json
import os
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
TREE = re.compile(r"^/api/buckets/(?P<bucket>[^/]+/[^/]+)/tree(?:/(?P<prefix>.*))?$")
PATHS_INFO = re.compile(r"^/api/buckets/(?P<bucket>[^/]+/[^/]+)/paths-info$")
RESOLVE = re.compile(r"^/buckets/(?P<bucket>[^/]+/[^/]+)/resolve/(?P<path>.+)$")
XET_READ_TOKEN = re.compile(r"^/api/buckets/(?P<bucket>[^/]+/[^/]+)/xet-read-token$")
RECONSTRUCTION = re.compile(r"^/v(?P<version>[0-9]+)/reconstructions/(?P<hash>[0-9a-f]{64})$")
DATASET_TREE = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<prefix>.*))?$")
XORB = re.compile(r"^/xorbs/(?P<hash>[0-9a-f]{64})$")
CHUNK = 64 * 1024  # bytes per xet chunk served (hf_xet accepts chunks up to 128 KiB)
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


class BucketStore:
    """The files of each --bucket's DIR, read-only, as the Hub would list and serve them.

    A file's xet hash is the sha256 of its bytes (hf_xet checks no hash on download); its xorb
    hash is the sha256 of the file hash. Symlinks are skipped, never followed."""

    def __init__(self, buckets: dict[str, str]):
        self.roots = {b: os.path.realpath(d) for b, d in buckets.items()}
        self.by_hash: dict[str, tuple[str, str]] = {}  # file or xorb hash -> (bucket, path)
        self.lock = threading.Lock()

    def _file(self, bucket: str, path: str) -> str | None:
        root = self.roots.get(bucket)
        if root is None or path.startswith("/") or ".." in path.split("/"):
            return None
        here = root
        for part in path.split("/"):
            here = os.path.join(here, part)
            if os.path.islink(here):
                return None
        return here if os.path.isfile(here) else None

    def read(self, bucket: str, path: str) -> bytes | None:
        full = self._file(bucket, path)
        if full is None:
            return None
        with open(full, "rb") as f:
            return f.read()

    def entry(self, bucket: str, path: str) -> dict | None:
        data = self.read(bucket, path)
        if data is None:
            return None
        file_hash = hashlib.sha256(data).hexdigest()
        with self.lock:
            self.by_hash[file_hash] = (bucket, path)
            self.by_hash[self.xorb_of(file_hash)] = (bucket, path)
        mtime = os.stat(self._file(bucket, path)).st_mtime
        return {"type": "file", "path": path, "size": len(data), "xetHash": file_hash,
                "mtime": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(mtime)),
                "uploadedAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(mtime))}

    @staticmethod
    def xorb_of(file_hash: str) -> str:
        return hashlib.sha256(file_hash.encode()).hexdigest()

    def tree(self, bucket: str, prefix: str, recursive: bool) -> list[dict] | None:
        root = self.roots.get(bucket)
        prefix = prefix.strip("/")
        if root is None or ".." in prefix.split("/"):
            return None
        start = os.path.join(root, prefix) if prefix else root
        if os.path.islink(start) or not os.path.isdir(start):
            entry = self.entry(bucket, prefix) if prefix else None
            return [entry] if entry else []
        out: list[dict] = []

        def visit(rel: str) -> None:
            here = os.path.join(root, rel) if rel else root
            for name in sorted(os.listdir(here)):
                path = f"{rel}/{name}" if rel else name
                full = os.path.join(here, name)
                if os.path.islink(full):
                    continue
                if os.path.isdir(full):
                    out.append({"type": "directory", "path": path,
                                "uploadedAt": "2026-09-04T00:00:00.000Z"})
                    if recursive:
                        visit(path)
                elif os.path.isfile(full):
                    out.append(self.entry(bucket, path))

        visit(prefix)
        return out

    def file_of(self, hash_: str) -> tuple[str, str] | None:
        with self.lock:
            return self.by_hash.get(hash_)

    def xorb(self, data: bytes) -> tuple[bytes, list[int]]:
        """The file as one xorb of uncompressed chunks (xet's 8-byte chunk header: version 0, the
        compressed length in 3 bytes LE, scheme 0 = none, the uncompressed length in 3 bytes LE),
        and the byte offset where each chunk starts."""
        out, starts = b"", []
        for i in range(0, max(len(data), 1), CHUNK):
            piece = data[i:i + CHUNK]
            starts.append(len(out))
            n = len(piece).to_bytes(3, "little")
            out += bytes([0]) + n + bytes([0]) + n + piece
        return out, starts


class FakeHub:
    def __init__(self, record_path: str | None, token: str | None, fail_commit: bool, parse: bool = True,
                 buckets: dict[str, str] | None = None):
        self.record_path = record_path
        self.buckets = BucketStore(buckets or {})
        self.token = token
        self.fail_commit = fail_commit
        self.parse = parse
        self.lock = threading.Lock()
        self.commits = 0
        self.eval_results: dict[str, list] = {}  # repo -> entries of its committed .eval_results files
        self.datasets: dict[str, str] = {}  # "NS/NAME@REV" -> the dir served as that revision's tree

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

    def _bytes(self, code: int, data: bytes, headers: dict | None = None, head: bool = False):
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(data)

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
        if self.hub.token is None or XORB.match(path):  # a xorb URL is presigned: no Authorization
            return True
        expected = XET_TOKEN_VALUE if CAS.match(path) or path == "/shards" else self.hub.token
        return self.headers.get("Authorization") == f"Bearer {expected}"

    def _handle(self, method: str):
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        _, body = self._body(path)
        hub = self.hub
        read = self._file_read(path)
        hub.record({"method": method, "path": path, "query": query,
                    "auth": bool(self.headers.get("Authorization")), "body": body,
                    **({"file": "/".join(read)} if read else {})})
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
        if self._bucket_read(method, path, query, body, endpoint):
            return None
        if method == "GET" and (m := DATASET_TREE.match(path)):
            return self._dataset_tree(m, query.get("recursive", [""])[0].lower() == "true")
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

    def _dataset_tree(self, m: re.Match, recursive: bool) -> None:
        root = self.hub.datasets.get(f"{m['repo']}@{m['rev']}")
        if root is None:
            return self._reply(404, {"error": f"Invalid rev id: {m['rev']}"},
                               headers={"X-Error-Code": "RevisionNotFound"})
        prefix = (m["prefix"] or "").strip("/")
        out: list[dict] = []
        for here, dirs, files in os.walk(os.path.join(root, prefix) if prefix else root):
            rel = os.path.relpath(here, root)
            rel = "" if rel == "." else rel
            for name in sorted(dirs):
                path = f"{rel}/{name}" if rel else name
                out.append({"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "path": path})
            for name in sorted(files):
                path = f"{rel}/{name}" if rel else name
                out.append({"type": "file", "oid": hashlib.sha1(path.encode()).hexdigest(),
                            "size": os.path.getsize(os.path.join(here, name)), "path": path})
            if not recursive:
                break
        return self._reply(200, out)

    def _file_read(self, path: str) -> tuple[str, str] | None:
        """(bucket, path) of the file whose content this request reads, if it reads one."""
        if m := RESOLVE.match(path):
            return m["bucket"], m["path"]
        if (m := RECONSTRUCTION.match(path)) or (m := XORB.match(path)):
            return self.hub.buckets.file_of(m["hash"])
        return None

    def _bucket_read(self, method: str, path: str, query: dict, body, endpoint: str) -> bool:
        """Answer the routes that list and download a bucket's files: True when the path was one of them."""
        store = self.hub.buckets
        if method == "GET" and (m := TREE.match(path)):
            entries = store.tree(m["bucket"], m["prefix"] or "", query.get("recursive", [""])[0].lower() == "true")
            if entries is None:
                self._reply(404, {"error": f"Bucket {m['bucket']} not found"})
            else:
                self._reply(200, entries)
        elif method == "POST" and (m := PATHS_INFO.match(path)):
            paths = body.get("paths", []) if isinstance(body, dict) else []
            self._reply(200, [e for e in (store.entry(m["bucket"], p) for p in paths) if e])
        elif method in ("GET", "HEAD") and (m := RESOLVE.match(path)):
            entry, data = store.entry(m["bucket"], m["path"]), store.read(m["bucket"], m["path"])
            if entry is None or data is None:
                self._reply(404, {"error": "Entry not found"})
            else:
                self._bytes(200, data, head=method == "HEAD", headers={
                    "X-Xet-Hash": entry["xetHash"],
                    "X-Xet-Refresh-Route": f"{endpoint}/api/buckets/{m['bucket']}/xet-read-token"})
        elif method == "GET" and XET_READ_TOKEN.match(path):
            exp = int(time.time()) + 3600
            self._reply(200, {"casUrl": endpoint, "accessToken": XET_TOKEN_VALUE, "exp": exp},
                        headers={"X-Xet-Cas-Url": endpoint, "X-Xet-Access-Token": XET_TOKEN_VALUE,
                                 "X-Xet-Token-Expiration": str(exp)})
        elif method == "GET" and (m := RECONSTRUCTION.match(path)):
            if m["version"] != "1":  # the Hub's answer while v2 is off: hf_xet falls back to v1
                self._reply(501, {"error": "reconstruction v2 is not enabled"})
            else:
                self._reconstruction(m["hash"], endpoint)
        elif method == "GET" and (m := XORB.match(path)):
            self._xorb(m["hash"])
        else:
            return False
        return True

    def _reconstruction(self, file_hash: str, endpoint: str) -> None:
        """v1 terms of a file: one xorb holding its chunks, fetched whole from /xorbs/{hash}."""
        store = self.hub.buckets
        found = store.file_of(file_hash)
        data = store.read(*found) if found else None
        if data is None:
            return self._reply(404, {"error": "no such file"})
        xorb_hash = store.xorb_of(file_hash)
        xorb, starts = store.xorb(data)
        chunks = {"start": 0, "end": len(starts)}
        return self._reply(200, {
            "offset_into_first_range": 0,
            "terms": [{"hash": xorb_hash, "unpacked_length": len(data), "range": chunks}],
            "fetch_info": {xorb_hash: [{"range": chunks, "url": f"{endpoint}/xorbs/{xorb_hash}",
                                        "url_range": {"start": 0, "end": len(xorb) - 1}}]}})

    def _xorb(self, xorb_hash: str) -> None:
        store = self.hub.buckets
        found = store.file_of(xorb_hash)
        data = store.read(*found) if found else None
        if data is None:
            return self._reply(404, {"error": "no such xorb"})
        xorb, _ = store.xorb(data)
        first, last = 0, len(xorb) - 1
        if r := re.match(r"bytes=(\d+)-(\d+)$", self.headers.get("Range") or ""):
            first, last = int(r[1]), min(int(r[2]), len(xorb) - 1)
        return self._bytes(206, xorb[first:last + 1], headers={"Content-Range": f"bytes {first}-{last}/{len(xorb)}"})

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
    parser.add_argument("--dataset", action="append", default=[], metavar="NS/NAME@REV=DIR",
                        help="serve DIR's tree as the dataset repo NS/NAME at revision REV (repeatable)")
    parser.add_argument("--bucket", action="append", default=[], metavar="NS/NAME=DIR",
                        help="serve DIR's files, read-only, as the bucket NS/NAME's (repeatable)")
    args = parser.parse_args()
    buckets = dict(b.split("=", 1) for b in args.bucket)
    Handler.hub = FakeHub(args.record, args.token, args.fail_commit, parse=not args.no_parse, buckets=buckets)
    Handler.hub.datasets = dict(d.split("=", 1) for d in args.dataset)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    write_port_file(server, args.port_file)
    serve_for(server, args.max_lifetime)


if __name__ == "__main__":
    main()
