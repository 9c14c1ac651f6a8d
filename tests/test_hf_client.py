"""tools/hf_client.py: the one way the Python tools reach HF, with one timeout and one token reader.

What is proved: the timeout is the setting HF_CALL_TIMEOUT (60 without it) and an explicit one wins;
every request huggingface_hub makes through the client is bounded by it, including the calls that
pass timeout=None down (list_jobs, model_info), which huggingface_hub's own client leaves unbounded;
the token is on no client object and in no message; and no module of tools/ but the factory makes
an HfApi, opens raw HTTP, or reads the token (so a new ad-hoc client fails this file).
"""

from __future__ import annotations

import ast
import http.server
import inspect
import threading
import urllib.error
from pathlib import Path

import click
import httpx2
import huggingface_hub
import pytest
from huggingface_hub import HfApi, constants
from huggingface_hub.utils import _http

from tools import hf_client

REPO = Path(__file__).resolve().parents[1]
TOKEN = "hf_fake-token-that-must-never-be-printed"
HUB_DEFAULT_FACTORY = _http.default_client_factory  # huggingface_hub's own, before any test patches it
UNBOUNDED = {"connect": None, "read": None, "write": None, "pool": None}


def bounded(seconds: float) -> dict:
    return {"connect": seconds, "read": seconds, "write": seconds, "pool": seconds}


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """huggingface_hub's default client with a transport that answers here and records each
    request: (the requests, the status to answer). Afterwards the process's huggingface_hub is
    given its own client factory back."""
    seen: list[httpx2.Request] = []
    answer = {"status": 200, "json": []}

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(answer["status"], json=answer["json"])

    def default_with_a_fake_transport() -> httpx2.Client:
        client = HUB_DEFAULT_FACTORY()
        return httpx2.Client(transport=httpx2.MockTransport(handle), event_hooks=client.event_hooks,
                             follow_redirects=client.follow_redirects, timeout=client.timeout)

    monkeypatch.setattr(_http, "default_client_factory", default_with_a_fake_transport)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_CALL_TIMEOUT", raising=False)
    monkeypatch.setattr(hf_client, "_installed", None)
    yield seen, answer
    huggingface_hub.set_client_factory(HUB_DEFAULT_FACTORY)


# --- the timeout -------------------------------------------------------------------------------------


def test_the_timeout_is_hf_call_timeout_else_60_and_an_explicit_one_wins(monkeypatch):
    monkeypatch.delenv("HF_CALL_TIMEOUT", raising=False)
    assert hf_client.call_timeout() == 60.0
    monkeypatch.setenv("HF_CALL_TIMEOUT", "")
    assert hf_client.call_timeout() == 60.0
    monkeypatch.setenv("HF_CALL_TIMEOUT", "90")
    assert hf_client.call_timeout() == 90.0
    assert hf_client.call_timeout(7) == 7.0  # a tool's --call-timeout wins over the setting
    assert hf_client.call_timeout(2.5) == 2.5


@pytest.mark.parametrize("value, said", [
    ("0", "got '0'"), ("86401", "got '86401'"), ("1.5", "got '1.5'"), ("ten", "got 'ten'"),
    (TOKEN, f"got a value of {len(TOKEN)} characters"),  # a long value is not echoed: it might be a secret
])
def test_a_setting_that_is_not_a_timeout_is_refused_in_one_line(monkeypatch, value, said):
    monkeypatch.setenv("HF_CALL_TIMEOUT", value)
    with pytest.raises(click.ClickException) as e:
        hf_client.call_timeout()
    assert e.value.message == f"setting HF_CALL_TIMEOUT must be a whole number from 1 to 86400, {said}"
    assert TOKEN not in e.value.message


@pytest.mark.parametrize("explicit", [0, -1, 86401])
def test_an_explicit_timeout_that_is_not_one_is_refused(explicit):
    with pytest.raises(click.ClickException, match=rf"^a call timeout must be more than 0 and at most 86400 "
                                                   rf"seconds, got {explicit}$"):
        hf_client.call_timeout(explicit)


def test_how_huggingface_hub_2_4_0_takes_a_timeout():
    """Which knob of the installed huggingface_hub bounds its calls, read in its source:

    - every request goes through the one httpx2.Client get_session() makes with the factory that
      set_client_factory() installs (there is no configure_http_backend any more); its default
      factory makes the client with timeout=None;
    - list_jobs and model_info take timeout=None by default and pass it down to the request, and
      httpx2 reads an explicit None as "no timeout", not as "the client's": a client-wide timeout
      alone would not bound them;
    - HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT are read from the environment once, at import,
      and bound as default arguments of the file-download calls only (get_hf_file_metadata,
      get_safetensors_metadata): they cannot be changed afterwards and never reach the jobs, repo
      tree or bucket calls.

    So hf_client installs, with set_client_factory, huggingface_hub's own client with the timeout
    as its default and a request hook that bounds whatever part of a request's timeout is None.
    """
    assert huggingface_hub.__version__ == "2.4.0"
    assert not hasattr(huggingface_hub, "configure_http_backend")
    assert "_GLOBAL_CLIENT_FACTORY()" in inspect.getsource(_http.get_session)
    assert "timeout=None," in inspect.getsource(HUB_DEFAULT_FACTORY)
    assert inspect.signature(HfApi.list_jobs).parameters["timeout"].default is None
    assert "paginate(path, params=params, headers=headers, timeout=timeout)" in inspect.getsource(HfApi.list_jobs)
    assert inspect.signature(HfApi.model_info).parameters["timeout"].default is None
    assert httpx2.Client(timeout=5).build_request("GET", "http://hub.test/", timeout=None).extensions["timeout"] \
        == UNBOUNDED
    assert 'os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT")' in inspect.getsource(constants)
    assert inspect.signature(HfApi.get_hf_file_metadata).parameters["timeout"].default == constants.HF_HUB_ETAG_TIMEOUT
    assert inspect.signature(HfApi.get_safetensors_metadata).parameters["timeout"].default \
        == constants.HF_HUB_DOWNLOAD_TIMEOUT
    for call in (HfApi.list_jobs, HfApi.list_repo_tree, HfApi.list_bucket_tree, HfApi.model_info):
        assert "HF_HUB_DOWNLOAD_TIMEOUT" not in inspect.getsource(call) and "HF_HUB_ETAG_TIMEOUT" not in \
            inspect.getsource(call), call.__name__


def test_without_the_factory_a_list_jobs_request_is_unbounded(hub):
    """The control: huggingface_hub's own client, as every tool had it, sends list_jobs unbounded."""
    seen, _ = hub
    huggingface_hub.set_client_factory(_http.default_client_factory)
    assert list(HfApi(endpoint="http://hub.test").list_jobs(namespace="alice")) == []
    assert [r.extensions["timeout"] for r in seen] == [UNBOUNDED]


def test_every_request_of_the_client_is_bounded_by_hf_call_timeout(hub, monkeypatch):
    seen, answer = hub
    monkeypatch.setenv("HF_CALL_TIMEOUT", "42")
    api = hf_client.api(endpoint="http://hub.test")
    assert list(api.list_jobs(namespace="alice")) == []  # passes timeout=None down
    answer["json"] = {"id": "alice/m", "private": False, "sha": "0" * 40}
    api.model_info("alice/m")  # passes timeout=None down too
    api.model_info("alice/m", timeout=3)  # a bound the call chose is kept
    assert [(r.method, r.url.path, r.extensions["timeout"]) for r in seen] == [
        ("GET", "/api/jobs/alice", bounded(42.0)), ("GET", "/api/models/alice/m", bounded(42.0)),
        ("GET", "/api/models/alice/m", bounded(3))]


def test_an_explicit_timeout_wins_and_a_new_bound_makes_a_new_client(hub, monkeypatch):
    seen, _ = hub
    monkeypatch.setenv("HF_CALL_TIMEOUT", "42")
    list(hf_client.api(7, endpoint="http://hub.test").list_jobs(namespace="alice"))
    list(hf_client.api(endpoint="http://hub.test").list_jobs(namespace="alice"))
    assert [r.extensions["timeout"] for r in seen] == [bounded(7.0), bounded(42.0)]


def test_hub_json_goes_through_the_bounded_session_with_the_token(hub):
    seen, answer = hub
    answer["json"] = {"timeoutSeconds": 60}
    assert hf_client.hub_json(hf_client.api(9, endpoint="http://hub.test"), "/api/jobs/alice/j1") == {"timeoutSeconds": 60}
    assert [(str(r.url), r.extensions["timeout"], r.headers["authorization"]) for r in seen] == [
        ("http://hub.test/api/jobs/alice/j1", bounded(9.0), f"Bearer {TOKEN}")]


# --- the token ---------------------------------------------------------------------------------------


def test_the_token_is_read_once_and_held_by_no_client(hub):
    seen, answer = hub
    assert hf_client.token() == TOKEN
    api = hf_client.api(endpoint="http://hub.test")
    assert TOKEN not in repr(api) and TOKEN not in str(api) and TOKEN not in repr(vars(api))
    answer["status"], answer["json"] = 401, {"error": "Invalid credentials in Authorization header"}
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as e:
        api.model_info("alice/m")
    # It was sent (huggingface_hub read it per request, with the same reader), and is in no message.
    assert [r.headers["authorization"] for r in seen] == [f"Bearer {TOKEN}"]
    assert TOKEN not in str(e.value) and TOKEN not in repr(e.value)


def test_no_token_when_there_is_none(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("HF_OIDC_RESOURCE", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "token"))
    assert hf_client.token() is None


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers 401 and keeps what it was sent."""

    seen: list[tuple[str, str | None]] = []

    def do_GET(self):  # noqa: N802 - http.server's naming
        Recorder.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args):
        pass


def test_open_url_sends_the_token_in_a_header_only_and_no_error_holds_it(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        errors = []
        for auth in (hf_client.AUTO, TOKEN, None):
            with pytest.raises(urllib.error.HTTPError) as e:
                hf_client.open_url(url, timeout=5, auth=auth)
            errors.append(e.value)
    finally:
        server.shutdown()
        server.server_close()
    assert Recorder.seen == [("/metrics", f"Bearer {TOKEN}"), ("/metrics", f"Bearer {TOKEN}"), ("/metrics", None)]
    assert [e.code for e in errors] == [401, 401, 401]
    assert all(TOKEN not in text for e in errors for text in (str(e), repr(e), str(e.reason), e.geturl()))


def test_open_url_bounds_each_socket_operation_by_hf_call_timeout(monkeypatch):
    asked = []
    monkeypatch.setattr(hf_client.urllib.request, "urlopen", lambda request, timeout: asked.append(
        (request.full_url, request.get_header("Authorization"), timeout)))
    monkeypatch.setenv("HF_CALL_TIMEOUT", "42")
    hf_client.open_url("https://j1--8000.hf.jobs/health", auth="t0k")
    hf_client.open_url("https://j1--8000.hf.jobs/health", timeout=10, auth=None)
    assert asked == [("https://j1--8000.hf.jobs/health", "Bearer t0k", 42.0),
                     ("https://j1--8000.hf.jobs/health", None, 10.0)]


# --- one way to HF: no other module makes its own client ---------------------------------------------

FACTORY = REPO / "tools" / "hf_client.py"
# What reaches HF, or reads its token, when called: only tools/hf_client.py may.
CLIENT_NAMES = {"HfApi", "HfFileSystem", "InferenceClient", "AsyncInferenceClient", "hf_hub_download",
                "snapshot_download", "get_session", "get_async_session", "http_backoff", "http_stream_backoff",
                "set_client_factory", "build_hf_headers", "get_token", "urlopen", "build_opener", "HTTPConnection",
                "HTTPSConnection", "ClientSession"}
# huggingface_hub's module-level calls are bound methods of its own module-level HfApi: each one is
# a client made elsewhere (huggingface_hub.list_models, .list_jobs, ...).
HUB_CALLS = {name for name in dir(huggingface_hub)
             if inspect.ismethod(getattr(huggingface_hub, name, None))
             and isinstance(getattr(huggingface_hub, name).__self__, HfApi)}
HTTP_MODULES = {"urllib.request", "requests", "httpx", "httpx2", "http.client", "aiohttp", "urllib3"}
# Modules whose very import is an HTTP client of its own (httpx2 may be imported for its exception
# classes, as the watchdog does; any call on it is still an offence).
HTTP_IMPORTS = HTTP_MODULES - {"httpx2"}


def offences(source: str) -> list[str]:
    """What in SOURCE reaches HF or reads its token other than through tools/hf_client.py."""
    tree = ast.parse(source)
    type_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    banned, modules, found = {}, {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and id(node) not in type_only:
            module = node.module or ""
            for a in node.names:
                if a.name in CLIENT_NAMES or (module.startswith("huggingface_hub") and a.name in HUB_CALLS):
                    banned[a.asname or a.name] = f"{module}.{a.name}"
                    found.append(f"line {node.lineno}: imports {module}.{a.name}")
                if f"{module}.{a.name}" in HTTP_IMPORTS:
                    found.append(f"line {node.lineno}: imports {module}.{a.name}")
            if module in HTTP_IMPORTS:
                found.append(f"line {node.lineno}: imports from {module}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in HTTP_IMPORTS:
                    found.append(f"line {node.lineno}: imports {a.name}")
                modules[a.asname or a.name.split(".")[0]] = a.name
        elif isinstance(node, ast.Call):
            func, name = node.func, None
            if isinstance(func, ast.Name) and func.id in banned:
                name = banned[func.id]
            elif isinstance(func, ast.Attribute):
                owner = ast.unparse(func.value)
                if func.attr in CLIENT_NAMES or (modules.get(owner.split(".")[0], owner).startswith("huggingface_hub")
                                                 and func.attr in HUB_CALLS):
                    name = f"{owner}.{func.attr}"
                elif modules.get(owner, owner) in HTTP_MODULES or owner in HTTP_MODULES:
                    name = f"{owner}.{func.attr}"
            if name:
                found.append(f"line {node.lineno}: calls {name}")
            # The token has one reader: os.environ.get("HF_TOKEN"), os.getenv("HF_TOKEN").
            if isinstance(func, ast.Attribute) and func.attr in ("get", "getenv", "pop") and node.args and \
                    isinstance(node.args[0], ast.Constant) and node.args[0].value in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
                found.append(f"line {node.lineno}: reads ${node.args[0].value}")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                node.slice.value in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN") and "environ" in ast.unparse(node.value):
            found.append(f"line {node.lineno}: reads ${node.slice.value}")
    return sorted(set(found))


@pytest.mark.parametrize("source", [
    "from huggingface_hub import HfApi\nHfApi()",
    "import huggingface_hub\nhuggingface_hub.HfApi(endpoint='x')",
    "import huggingface_hub as hh\nhh.list_models()",
    "from huggingface_hub import list_repo_tree as tree\ntree('a/b')",
    "from huggingface_hub.utils import get_session\nget_session().get('https://huggingface.co/api/models')",
    "import urllib.request\nurllib.request.urlopen('https://huggingface.co/api/whoami-v2')",
    "from urllib.request import urlopen as o\no('https://huggingface.co')",
    "import httpx2\nhttpx2.get('https://huggingface.co')",
    "import requests\nrequests.get('https://huggingface.co')",
    "from huggingface_hub import get_token\nget_token()",
    "import os\nos.environ.get('HF_TOKEN')",
    "import os\nos.environ['HF_TOKEN']",
])
def test_the_walk_catches_an_ad_hoc_client(source):
    assert offences(source) != [], source


def test_the_walk_lets_pass_what_is_not_a_client():
    ok = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\nimport httpx2\n"
          "if TYPE_CHECKING:\n    from huggingface_hub import HfApi\n"
          "from huggingface_hub import CommitOperationAdd, constants\nfrom tools import hf_client\n"
          "ERRORS = (httpx2.HTTPError, OSError)\napi = hf_client.api(5)\napi.list_jobs(namespace='a')\n"
          "CommitOperationAdd('a', b'x')\nconstants.ENDPOINT\nos.environ.get('HF_ENDPOINT')\n")
    assert offences(ok) == []


def test_no_module_but_the_factory_makes_a_client_opens_raw_http_or_reads_the_token():
    found = {str(p.relative_to(REPO)): o for p in sorted((REPO / "tools").rglob("*.py"))
             if p != FACTORY and (o := offences(p.read_text()))}
    assert found == {}
    assert offences(FACTORY.read_text()) != []  # the factory itself is what the walk exempts
