"""hf_client: the one way the Python tools reach Hugging Face, with one timeout and one token reader.

  api(timeout=None) -> HfApi       huggingface_hub's client, every HTTP request it makes bounded
  hub_json(hub, path)              a GET of the Hub's JSON that HfApi has no method for
  open_url(url, timeout=..., auth=...)  a raw GET (the jobs proxy: a server's /metrics, /health),
                                   the token in a header, each socket operation bounded
  call_timeout(explicit=None)      the seconds: an explicit --call-timeout wins, else the setting
                                   HF_CALL_TIMEOUT (env), else 60
  token()                          the HF token huggingface_hub would use (HF_TOKEN, else the saved
                                   `hf auth login`), or None: the project's only reader of it

How the timeout is applied, in huggingface_hub 2.4.0 (tests/test_hf_client.py asserts each fact in
the installed source): every request goes through one shared httpx2.Client that get_session() makes
with the factory set_client_factory() installs. Its default factory gives the client timeout=None,
and calls such as list_jobs pass timeout=None down to the request, which httpx2 reads as "no
timeout", not as "the client's". The constants HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT are
read once at import and bound as default arguments of the download functions only, so they can
neither be changed afterwards nor reach the jobs, repo-tree or bucket calls. So api() installs a
client factory whose client has the timeout as its default and a request hook that gives every
request the timeout in each of connect, read, write and pool that the call left unbounded (a
bound huggingface_hub chose itself, such as its 10 s etag wait, is kept). httpx2 bounds each socket
operation, not a whole call, and huggingface_hub retries a timed-out request up to 5 times: a call
that never answers ends, later than the timeout but never never. Bucket file transfers go through
hf_xet (Rust, not httpx2), which this does not bound.

The token is never passed to HfApi: huggingface_hub reads it per request with the very get_token()
token() calls, so it is held by no client object (nothing to show in a repr) and never put in an
argv. open_url puts it in an Authorization header only; no message this module raises holds it.

tools/run/watchdog.py imports this module and runs inside a scheduled HF Job from
tools/run/watchdog_bundle.py's bundle, which packs it: it imports nothing of the repository, and
of the world only the standard library, click and huggingface_hub (httpx2 with it).
"""

from __future__ import annotations

import os
import re
import urllib.request
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from huggingface_hub import HfApi

SETTING = "HF_CALL_TIMEOUT"
DEFAULT_CALL_TIMEOUT = 60.0
MOST = 86400  # the catalogue's bound (env/defaults.env: [int 1..86400])
TIMEOUT_PARTS = ("connect", "read", "write", "pool")
AUTO = object()  # open_url's token: the one token() reads

_installed: float | None = None  # the timeout of the client factory this process installed


class SettingError(click.ClickException):
    """A setting this module reads that is not one (exit 1, one line)."""


def call_timeout(explicit: float | None = None) -> float:
    """Seconds one call to HF may take: EXPLICIT (a tool's --call-timeout) when given, else the
    setting HF_CALL_TIMEOUT from the environment, else 60."""
    if explicit is not None:
        seconds = float(explicit)
        if not 0 < seconds <= MOST:
            raise SettingError(f"a call timeout must be more than 0 and at most {MOST} seconds, got {explicit!r}")
        return seconds
    text = os.environ.get(SETTING, "")
    if text == "":
        return DEFAULT_CALL_TIMEOUT
    if not (re.fullmatch(r"[0-9]{1,5}", text) and 1 <= int(text) <= MOST):
        # A long value is not echoed: whatever was put there by mistake (a token) stays unsaid.
        got = repr(text) if len(text) <= 12 else f"a value of {len(text)} characters"
        raise SettingError(f"setting {SETTING} must be a whole number from 1 to {MOST}, got {got}")
    return float(text)


def token() -> str | None:
    """The HF token huggingface_hub would use (HF_TOKEN, else the saved login), or None."""
    from huggingface_hub import get_token  # noqa: PLC0415  (huggingface_hub is most of an import's time)

    return get_token() or None


def bound(seconds: float):
    """The request hook: each part of a request's timeout that is unbounded gets SECONDS."""

    def hook(request) -> None:
        current = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {part: seconds if current.get(part) is None else current[part]
                                         for part in TIMEOUT_PARTS}

    hook.seconds = seconds
    return hook


def client_factory(seconds: float):
    """huggingface_hub's own client (its request hook, redirects followed), bounded by SECONDS."""
    from huggingface_hub.utils._http import default_client_factory  # noqa: PLC0415

    def make():
        client = default_client_factory()
        client.timeout = seconds  # what a request that names no timeout gets
        client.event_hooks = {**client.event_hooks,
                              "request": [*client.event_hooks["request"], bound(seconds)]}  # and one that passes None
        return client

    return make


def install(seconds: float) -> None:
    """Make every request of this process's huggingface_hub bounded by SECONDS (a new shared client
    when the bound changes; the last one asked for holds)."""
    global _installed
    if _installed == seconds:
        return
    from huggingface_hub import set_client_factory  # noqa: PLC0415

    set_client_factory(client_factory(seconds))
    _installed = seconds


def api(timeout: float | None = None, *, endpoint: str | None = None) -> HfApi:
    """huggingface_hub's client, its requests bounded by call_timeout(TIMEOUT); its token is
    token()'s, read per request (never stored on it). ENDPOINT: another Hub than HF_ENDPOINT's."""
    from huggingface_hub import HfApi  # noqa: PLC0415

    install(call_timeout(timeout))
    return HfApi(endpoint=endpoint)


def hub_json(hub: HfApi, path: str):
    """GET <the Hub's endpoint><PATH> as HF answers it (JSON), through huggingface_hub's own
    bounded session and headers (the token read there): for an answer HfApi keeps less of."""
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status  # noqa: PLC0415

    install(_installed or call_timeout())
    response = get_session().get(f"{hub.endpoint}{path}", headers=build_hf_headers())
    hf_raise_for_status(response)
    return response.json()


def open_url(url: str, *, timeout: float | None = None, auth: object = AUTO, headers: dict | None = None):
    """GET URL (an answer to read as a context manager, urllib's), each socket operation bounded by
    call_timeout(TIMEOUT); AUTH, the token (by default token()'s; None or "" for none), in an
    Authorization header, never in the URL. urllib's errors are raised as they are: none holds a header."""
    value = token() if auth is AUTO else auth
    sent = {**(headers or {}), **({"Authorization": f"Bearer {value}"} if value else {})}
    return urllib.request.urlopen(urllib.request.Request(url, headers=sent), timeout=call_timeout(timeout))
