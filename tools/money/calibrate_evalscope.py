"""calibrate_evalscope: evalscope perf run so that nothing it prints, logs or leaves holds the token,
and its failure said in one line with its cause.

The endpoint wants the HF token as a bearer, and an endpoint may repeat what it was sent in an
error body (the Authorization header, token and all): evalscope logs such a body verbatim and keeps
it. So the token is taken out before evalscope writes anything wherever evalscope lets it be, and
at once after it where it does not:

- each request's answer where it enters evalscope, its API plugin (subclassed here: evalscope's own
  extension point, redacting_api): the error, text and messages are redacted before evalscope logs,
  stores (its results database, where the messages are pickled, out of reach of any search
  afterwards) or summarises them; and the last failed request is kept, for the one line;
- every log record, as it is made (logging's record factory, redacted_records): no handler,
  evalscope's benchmark.log among them, ever sees the token;
- its standard output and error, at the file descriptors, so its progress bars, tables, warnings
  and any child process's output too (captured_output): read through a pipe, redacted line by line
  and written to evalscope.log beside its outputs. None of it reaches the terminal: a failure is
  one line (failure_line), and the log holds the rest;
- every file under its outputs dir, in place, as soon as it has ended (redact_tree): the net under
  the rest, for what evalscope writes itself with no hook before the write (its JSON summaries, its
  HTML report). Between evalscope's write and this one such a file is on disk as evalscope wrote
  it; short of changing evalscope, redacting it before anything else reads it is the best
  available.

What is redacted (Redactor): the exact values given (the token), anything of an HF token's shape
(hf_ and 20 or more letters and digits), a bearer's value and an Authorization header's value.
"""

from __future__ import annotations

import contextlib
import http
import logging
import os
import re
import stat
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tools import safe_read

REDACTED = "[redacted]"
# A shorter value would be found in half the lines evalscope writes; a real key is far longer.
MIN_SECRET = 8
# A stream line longer than this (a progress bar never ends one) is redacted and written in pieces.
LINE_CAP = 1 << 20
# How long the end of calibrate waits for the last of evalscope's output once its run has ended: a
# child of evalscope that still holds the pipe is not waited for past it.
DRAIN_WAIT_S = 10
# The shapes, tried in one pass after the exact values: a bearer's value (RFC 6750's b64token), and an
# Authorization header's value to the end of its line or string (printable ASCII but quotes and
# backslashes, so a binary file's bytes around it are never taken), as a header line, JSON, a Python
# dict or JSON inside a JSON string write it; the word before each is kept. A value already
# redacted is left as it is, so redacting twice changes nothing.
SHAPES = (r"(?P<bearer>(?i:\bbearer)\s+)(?!\[redacted\])[A-Za-z0-9._~+/-]+=*"
          r"|(?P<header>(?i:\bauthorization)\\?[\"']?\s*[:=]\s*\\?[\"']?)(?!\s|\[redacted\])[\t !#-&(-\[\]-~]+"
          r"|hf_[A-Za-z0-9]{20,}")


class Redactor:
    """Takes the secrets given, and the SHAPES, out of text or bytes."""

    def __init__(self, secrets):
        values = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)
        exact = ["|".join(map(re.escape, values))] if values else []
        self._text = [re.compile(p) for p in [*exact, SHAPES]]
        self._bytes = [re.compile(p.encode()) for p in [*exact, SHAPES]]

    def text(self, text: str) -> str:
        return _redact(text, self._text, REDACTED, "*", keep_length=False)

    def bytes(self, data: bytes, keep_length: bool = False) -> bytes:
        """`data` redacted; with keep_length each redacted value becomes as many *s, so a binary file
        (a SQLite database) keeps every offset and stays what it was."""
        return _redact(data, self._bytes, REDACTED.encode(), b"*", keep_length)

    def value(self, value):
        """A request's answer as evalscope keeps it (strings in dicts and lists), redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def _redact(value, patterns, redacted, star, keep_length: bool):
    def replace(m: re.Match):
        groups = m.groupdict()
        kept = groups.get("bearer") or groups.get("header") or m.group()[:0]
        return kept + (star * (len(m.group()) - len(kept)) if keep_length else redacted)

    for pattern in patterns:
        value = pattern.sub(replace, value)
    return value


# --- evalscope's streams, log records and files ------------------------------------------------------

@contextlib.contextmanager
def captured_output(log_path: Path, redactor: Redactor):
    """File descriptors 1 and 2 into `log_path`, redacted as they are written; restored on the way
    out. A thread reads the pipe and writes whole lines, so a token split across two writes is
    redacted whole (a token holds no line end). sys.stdout and sys.stderr are left the objects they
    are: tqdm tells evalscope's console log handler by them, and in calibrate's process they write
    to these descriptors."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    log = open(log_path, "wb")  # noqa: SIM115  (the drain closes it, at the pipe's end)
    read_end, write_end = os.pipe()
    drain = threading.Thread(target=_drain, args=(read_end, log, redactor), name="calibrate-drain", daemon=True)
    drain.start()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a stream evalscope closed
                stream.flush()
        for fd, original in zip((1, 2), saved):
            os.dup2(original, fd)
            os.close(original)
        with contextlib.suppress(OSError):  # closed above, unless a dup2 failed first
            os.close(write_end)
        drain.join(DRAIN_WAIT_S)


def _drain(read_end: int, log, redactor: Redactor) -> None:
    pending = b""
    try:
        while chunk := os.read(read_end, 1 << 16):
            pending += chunk
            cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
            if not cut and len(pending) > LINE_CAP:
                cut = len(pending)
            if cut:
                log.write(redactor.bytes(pending[:cut]))
                log.flush()
                pending = pending[cut:]
        log.write(redactor.bytes(pending))
    finally:
        log.close()
        os.close(read_end)


@contextlib.contextmanager
def redacted_records(redactor: Redactor):
    """Every log record redacted as it is made (its message, traceback and stack), whatever logger
    makes it and whatever handlers it goes to."""
    make = logging.getLogRecordFactory()

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001  (arguments that do not fit the format: logging's own error, redacted)
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = redactor.text(message), None
        if record.exc_info:
            formatted = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text, record.exc_info = redactor.text(formatted), None
        if record.stack_info:
            record.stack_info = redactor.text(record.stack_info)
        return record

    logging.setLogRecordFactory(factory)
    try:
        yield
    finally:
        logging.setLogRecordFactory(make)


def redact_tree(root: Path, redactor: Redactor) -> list[str]:
    """Every regular file under `root` that holds a secret, redacted in place (a binary one byte for
    byte, keeping its length) and replaced atomically; links are not followed. The paths rewritten."""
    rewritten = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:  # a link (not followed out of the tree), or gone
                continue
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                data = f.read()
            clean = redactor.bytes(data, keep_length=b"\x00" in data)
            if clean != data:
                safe_read.write_atomic(path, clean, copy_stat_from=path)
                rewritten.append(path)
    return rewritten


# --- each request, where it enters evalscope ---------------------------------------------------------

@dataclass
class LastFailure:
    """The last request evalscope saw fail: its HTTP status (None: no answer came) and its error as
    evalscope keeps it (the body, or the formatted exception), redacted."""
    status: int | None = None
    error: str | None = None


def redacting_api(name: str, redactor: Redactor, failure: LastFailure) -> None:
    """evalscope's API plugin `name` replaced, in this process, by a subclass that redacts each answer
    before evalscope sees it and keeps the last failed one in `failure`."""
    from evalscope.perf.plugin.registry import ApiRegistry

    base = ApiRegistry.get_class(name)

    class Redacting(base):
        async def process_request(self, client_session, url, headers, body):
            output = await super().process_request(client_session, url, headers, body)
            if output.error:
                output.error = redactor.text(output.error)
            # A streamed answer keeps a message per token: redacting a thousand of them between other
            # requests' tokens would stall the event loop that times those, for 10 ms. A successful
            # answer's are redacted when its text holds what is redacted, a failed one's always.
            text = redactor.value(output.generated_text)
            if text != output.generated_text or not output.success:
                output.response_messages = redactor.value(output.response_messages)
            output.generated_text = text
            if not output.success:
                failure.status, failure.error = output.status_code, output.error
            return output

    Redacting.__name__ = Redacting.__qualname__ = base.__name__  # evalscope names its plugin in messages
    ApiRegistry.register(name, Redacting)


# --- a failure, in one line --------------------------------------------------------------------------

TOKEN_REJECTED = ("it rejects the HF token (the token needs read access to the job's namespace): hf auth login, "
                  "or set HF_TOKEN")
TIMEOUTS = {"TimeoutError", "ServerTimeoutError", "ConnectionTimeoutError", "SocketTimeoutError"}
# An exception's line in a formatted traceback: its name, unindented, then its message.
EXCEPTION_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?:: (?P<message>.*))?$", re.MULTILINE)
ERRNO = re.compile(r"^\[Errno -?[0-9]+\] ")


def one_line(text: str, limit: int = 200) -> str:
    return safe_read.clip(safe_read.printable(" ".join(text.split())), limit)


def failure_cause(failure: LastFailure, url: str, timeout: float, run: str) -> str | None:
    """What made the last failed request fail, said with its fix; None when no request failed."""
    if failure.status is not None:
        try:
            said = f"the endpoint answered {failure.status} {http.HTTPStatus(failure.status).phrase}"
        except ValueError:
            said = f"the endpoint answered HTTP {failure.status}"
        if failure.status in (401, 403):
            return f"{said}: {TOKEN_REJECTED}"
        if failure.status == 404:
            return f"{said}: nothing serves {url} (an API_BASE must be the server's /v1)"
        return f"{said}: {one_line(failure.error or '')}"
    if failure.error is None:
        return None
    chain = list(EXCEPTION_LINE.finditer(failure.error))
    names = {m["name"].rsplit(".", 1)[-1] for m in chain}
    where = urlsplit(url)
    if "ConnectionRefusedError" in names:
        return (f"the connection to {where.netloc} was refused: nothing listens there (is the server up? "
                f"make status RUN={run})")
    if names & {"gaierror", "ClientConnectorDNSError"}:
        reason = ERRNO.sub("", next((m["message"] for m in chain if m["message"]), ""))
        return f"the endpoint's host {where.hostname} does not resolve ({one_line(reason)}): is its address right?"
    if chain and chain[-1]["name"].rsplit(".", 1)[-1] in TIMEOUTS:
        return (f"the endpoint sent no answer within CALIBRATE_TIMEOUT ({timeout:g} s): the server is up but slow or "
                f"stuck (make logs RUN={run}), or raise CALIBRATE_TIMEOUT")
    return f"the request failed: {one_line(chain[-1].group() if chain else failure.error)}"


def failure_line(failure: LastFailure, error: BaseException | None, url: str, timeout: float, run: str,
                 log: str) -> str:
    """calibrate's one line for a run that raised `error`, or that ended measuring nothing (None), with
    where evalscope's output is. evalscope raises TimeoutError("Test connection failed") whatever
    failed its connection check: that, and a run that measured nothing, are said by the last failed
    request's cause. Any other exception (an interrupted run, a tokenizer it could not load) is said
    as it is."""
    cause = failure_cause(failure, url, timeout, run) if error is None or isinstance(error, TimeoutError) else None
    if cause is None and error is not None:
        cause = f"evalscope perf failed against {url}: {type(error).__name__}: {one_line(str(error), 300)}"
    elif cause is None:
        cause = f"evalscope perf measured no time per output token at {url} (every request failed?)"
    return f"{cause}; nothing recorded (evalscope's output: {safe_read.shown(log)})"


# --- the run -----------------------------------------------------------------------------------------

def run_perf(args, redactor: Redactor, log: Path) -> dict:
    """evalscope perf's results for its Arguments `args`, run as the module says; its output in `log`.
    Raises what evalscope raised, once every file it left is redacted."""
    from evalscope.perf.main import run_perf_benchmark

    raw = Path(args.outputs_dir)  # evalscope puts its files in a dir of the model's below it
    raw.mkdir(parents=True, exist_ok=True)
    colour = os.environ.get("NO_COLOR")
    os.environ["NO_COLOR"] = "1"  # a log file, not a terminal: evalscope's log lines without escapes
    try:
        with captured_output(log, redactor), redacted_records(redactor):
            return run_perf_benchmark(args)
    finally:
        if colour is None:
            os.environ.pop("NO_COLOR", None)
        else:
            os.environ["NO_COLOR"] = colour
        redact_tree(raw, redactor)
