"""A loopback OpenAI-compatible model server, standing in for sglang or vLLM behind the jobs proxy.

Usage:
    python tests/fakes/fake_openai.py --port-file PORT_FILE [--record REQUESTS.jsonl]
        [--model Qwen/Qwen3-8B] [--health-503 N] [--refuse-until FILE]
        [--reasoning none|sglang|vllm|inline] [--answer TEXT] [--max-lifetime 120]
        [--workers N [--unhealthy K [--unhealthy-polls M]] | --workers-body FILE] [--metrics FILE]
        [--decode-ms MS] [--echo-auth] [--engine-version V] [--metrics-path P]
        [--protocols "openai_chat_completions anthropic_messages openai_responses"] [--wrong-shapes]
        [--messages-cut]

It binds 127.0.0.1 on a free port and writes the port to PORT_FILE at once, then:

    --refuse-until F the socket is bound but not listening until file F exists (the test makes it
                     once it has seen a refusal happen), so connections are refused: vLLM and
                     sglang while they load weights (docs/hf-jobs.md §5, §6). An event, not a
                     time: a loaded machine's first poll may come after any fixed time.
    --health-503 N   the first N GET /health answer 503: sglang during warm-up
    GET  /health                 200, empty body (after the above)
    GET  /v1/models              {"object": "list", "data": [{"id": MODEL, ...}]}, even while
                                 /health answers 503, as sglang does
    POST /v1/chat/completions    one completion; --reasoning picks how thinking shows:
        none     no reasoning fields; usage.reasoning_tokens 0 (sglang, thinking off)
        sglang   message.reasoning_content + usage.reasoning_tokens and
                 usage.completion_tokens_details.reasoning_tokens
        vllm     message.reasoning, no reasoning token count
        inline   <think>...</think> inside message.content (no reasoning parser)
                                 The answer is "4" (the probe's question), or --answer's TEXT:
                                 e.g. terminus-2's JSON marking its task complete, so that a
                                 trial ends on the agent's own decision, not on its timeout.
                                 With "stream": true (a load test's requests): server-sent
                                 events, one chunk per output token (max_tokens of them, at most
                                 4096), --decode-ms apart, then a chunk with the usage and
                                 [DONE]; the body is recorded without its messages.
    POST /v1/messages            one Anthropic Messages answer ({"type": "message", "content":
                                 [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn",
                                 "usage": {"input_tokens", "output_tokens"}}), as sglang's route
    POST /v1/responses           one OpenAI Responses answer ({"object": "response", "status":
                                 "completed", "output": [a message with one output_text]})
        --protocols WORDS  which of the three inference routes answer (harbor's ModelApiFormat
                         names: openai_chat_completions, anthropic_messages, openai_responses);
                         the others answer 404, as an engine without that route does. Default: all
        --wrong-shapes     /v1/messages and /v1/responses answer 200 with a chat completion, as a
                         server that sends every route to one handler would
        --messages-cut     /v1/messages answers a message of one thinking block that stopped at
                         max_tokens: a model that thought through the whole budget
    GET  /workers                404 (a single engine has none), unless one of:
        --workers N      sglang's Model Gateway in front of N workers (data parallelism): its
                         worker list as sgl-model-gateway's WorkerListResponse serialises it,
                         {"workers": [{"id", "url": "http://127.0.0.1:<31000+i>", "model_id",
                         "priority", "cost", "worker_type", "is_healthy", "load",
                         "connection_mode"}, ...], "total": N, "stats": {"total_workers",
                         "healthy_workers", "total_models", "total_load", "by_type"}}; the
                         gateway's /health answers 200 whatever its workers do
        --unhealthy K    the last K workers report is_healthy false...
        --unhealthy-polls M  ...for the first M GET /workers only (default: always): replicas
                         that finish loading while the server is polled
        --workers-body FILE  FILE's bytes as the answer, status 200 (a hostile gateway)
    GET  /metrics                404, as sglang without --enable-metrics answers, unless
        --metrics FILE   FILE's bytes as the answer, status 200, read again at every request, so
                         a test sets the figures (a Prometheus text exposition, as vLLM's
                         `vllm:num_requests_running 0` / `vllm:generation_tokens_total 120`); a
                         FILE that does not exist (yet) answers 404
        --metrics-path P  where that FILE is served instead of /metrics (/engine_metrics: SMG in
                         front of data-parallel engines, whose own port has no /metrics)

    GET  /server_info            404, unless --engine-version V: sglang's server info, {"version": V, …}
    GET  /version                404, unless --engine-version V: vLLM's {"version": V}

Every request is appended to --record as one JSON line:
    {"method": "GET", "path": "/health", "status": 503, "auth": "ok", "body": null}
"auth" is "missing", "ok" (the Bearer value equals $FAKE_OPENAI_EXPECT_TOKEN, or any value
when that variable is unset) or "wrong". A request that carries its key in an x-api-key header
(an Anthropic client given ANTHROPIC_API_KEY instead of a bearer) also gets "x_api_key": true;
the jobs proxy reads only the bearer, so for it such a request is "missing". The token itself is never written anywhere.
With $FAKE_OPENAI_EXPECT_TOKEN set, requests without the right token answer 401, as the
jobs proxy does; with --echo-auth that 401's body repeats the Authorization header it was
sent, token and all, as an error page may: what a client that logs error bodies verbatim
(evalscope perf) then writes wherever it logs. The server exits by itself after --max-lifetime
seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes.loopback import serve_for, write_port_file

THINKING = "The user asks for 2+2. That is 4."


class State:
    def __init__(self, args: argparse.Namespace):
        self.model = args.model
        self.health_503_left = args.health_503
        self.reasoning = args.reasoning
        self.answer = args.answer
        self.record_path = args.record
        self.workers = args.workers
        self.decode_secs = args.decode_ms / 1000
        self.unhealthy = args.unhealthy
        self.unhealthy_polls_left = args.unhealthy_polls
        self.workers_body = None
        if args.workers_body:
            with open(args.workers_body, "rb") as f:
                self.workers_body = f.read()
        self.metrics = args.metrics
        self.metrics_path = args.metrics_path
        self.expect_token = os.environ.get("FAKE_OPENAI_EXPECT_TOKEN")
        self.echo_auth = args.echo_auth
        self.engine_version = args.engine_version
        self.protocols = set(args.protocols.split())
        self.wrong_shapes = args.wrong_shapes
        self.messages_cut = args.messages_cut
        self.lock = threading.Lock()

    def auth(self, header: str | None) -> str:
        if not header:
            return "missing"
        if self.expect_token is None:
            return "ok"
        return "ok" if header == f"Bearer {self.expect_token}" else "wrong"

    def record(self, entry: dict) -> None:
        if self.record_path:
            with self.lock, open(self.record_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")


def completion(state: State, request: dict) -> dict:
    message: dict = {"role": "assistant", "content": state.answer}
    usage: dict = {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}
    if state.reasoning == "none":
        message["reasoning_content"] = None
        usage["reasoning_tokens"] = 0
    elif state.reasoning == "sglang":
        message["reasoning_content"] = THINKING
        usage.update(completion_tokens=14, total_tokens=34, reasoning_tokens=12)
        usage["completion_tokens_details"] = {"reasoning_tokens": 12}
    elif state.reasoning == "vllm":
        message["reasoning"] = THINKING
        usage.update(completion_tokens=14, total_tokens=34)
    elif state.reasoning == "inline":
        message["content"] = f"<think>\n{THINKING}\n</think>\n\n{state.answer}"
        usage.update(completion_tokens=16, total_tokens=36)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", state.model),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage,
    }


def anthropic_message(state: State, request: dict) -> dict:
    """sglang's POST /v1/messages answer (Anthropic Messages)."""
    if state.messages_cut:
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": request.get("model", state.model),
                "content": [{"type": "thinking", "thinking": THINKING}], "stop_reason": "max_tokens",
                "stop_sequence": None, "usage": {"input_tokens": 20, "output_tokens": request.get("max_tokens", 0)}}
    return {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": request.get("model", state.model),
        "content": [{"type": "text", "text": state.answer}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 2},
    }


def response(state: State, request: dict) -> dict:
    """POST /v1/responses (OpenAI Responses): one completed message."""
    return {
        "id": "resp_fake", "object": "response", "created_at": int(time.time()), "status": "completed",
        "model": request.get("model", state.model),
        "output": [{"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": state.answer, "annotations": []}]}],
        "usage": {"input_tokens": 20, "output_tokens": 2, "total_tokens": 22},
    }


# The inference routes by the protocol (harbor's ModelApiFormat name) each one speaks.
ROUTES = {"/v1/chat/completions": "openai_chat_completions", "/v1/messages": "anthropic_messages",
          "/v1/responses": "openai_responses"}


def worker_list(state: State) -> dict:
    """The gateway's GET /workers answer; the unhealthy ones recover after --unhealthy-polls."""
    with state.lock:
        sick = state.unhealthy if state.unhealthy_polls_left != 0 else 0
        state.unhealthy_polls_left -= state.unhealthy_polls_left > 0
    workers = [{"id": f"worker-{i}", "url": f"http://127.0.0.1:{31000 + i}", "model_id": state.model,
                "priority": 50, "cost": 1.0, "worker_type": "regular", "is_healthy": i < state.workers - sick,
                "load": 0, "connection_mode": "Http"} for i in range(state.workers)]
    healthy = sum(w["is_healthy"] for w in workers)
    return {"workers": workers, "total": len(workers),
            "stats": {"total_workers": len(workers), "healthy_workers": healthy, "total_models": 1,
                      "total_load": 0, "by_type": {"regular": len(workers), "prefill": 0, "decode": 0}}}


class Handler(BaseHTTPRequestHandler):
    state: State  # set on the class by main()
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def _reply(self, code: int, payload=None, body: dict | None = None, auth: str = "missing"):
        raw = payload if isinstance(payload, bytes) else b"" if payload is None else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
        entry = {"method": self.command, "path": self.path, "status": code, "auth": auth, "body": body}
        if self.headers.get("x-api-key") is not None:
            entry["x_api_key"] = True
        self.state.record(entry)

    def _handle(self):
        state = self.state
        auth = state.auth(self.headers.get("Authorization"))
        body = None
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                return self._reply(400, {"error": {"message": "body is not JSON"}}, auth=auth)
        if state.expect_token is not None and auth != "ok":
            sent = f": {self.headers.get('Authorization')}" if state.echo_auth else ""
            return self._reply(401, {"error": f"Invalid credentials in Authorization header{sent}"}, body, auth)

        if self.command == "GET" and self.path == "/health":
            with state.lock:
                warming = state.health_503_left > 0
                state.health_503_left -= warming
            return self._reply(503 if warming else 200, None, body, auth)
        if self.command == "GET" and self.path == "/v1/models":
            data = [{"id": state.model, "object": "model", "owned_by": "fake", "root": state.model,
                     "max_model_len": 32768}]
            return self._reply(200, {"object": "list", "data": data}, body, auth)
        if self.command == "GET" and self.path == "/workers" and state.workers_body is not None:
            return self._reply(200, state.workers_body, body, auth)
        if self.command == "GET" and self.path == "/workers" and state.workers:
            return self._reply(200, worker_list(state), body, auth)
        if self.command == "POST" and ROUTES.get(self.path, "-") not in state.protocols:
            return self._reply(404, {"detail": "Not Found"}, body, auth)
        if self.command == "POST" and self.path == "/v1/chat/completions" and (body or {}).get("stream"):
            return self._stream(body, auth)
        if self.command == "GET" and self.path == state.metrics_path and state.metrics and os.path.exists(state.metrics):
            with open(state.metrics, "rb") as f:
                return self._reply(200, f.read(), body, auth)
        if self.command == "POST" and self.path == "/v1/chat/completions":
            return self._reply(200, completion(state, body or {}), body, auth)
        if self.command == "POST" and self.path in ("/v1/messages", "/v1/responses") and state.wrong_shapes:
            return self._reply(200, completion(state, body or {}), body, auth)
        if self.command == "POST" and self.path == "/v1/messages":
            return self._reply(200, anthropic_message(state, body or {}), body, auth)
        if self.command == "POST" and self.path == "/v1/responses":
            return self._reply(200, response(state, body or {}), body, auth)
        if self.command == "GET" and self.path == "/server_info" and state.engine_version:
            return self._reply(200, {"version": state.engine_version, "model_path": state.model, "tp_size": 1}, body, auth)
        if self.command == "GET" and self.path == "/version" and state.engine_version:
            return self._reply(200, {"version": state.engine_version}, body, auth)
        return self._reply(404, {"detail": "Not Found"}, body, auth)

    def _stream(self, body: dict, auth: str):
        """One completion as server-sent events, a chunk per token: what a load test reads its
        time to first token and time per output token from."""
        tokens = max(1, min(int(body.get("max_tokens") or 16), 4096))
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [] if isinstance(m, dict))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(delta: dict, finish: str | None = None, usage: dict | None = None) -> None:
            chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": body.get("model", self.state.model),
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                chunk["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

        for _ in range(tokens):
            time.sleep(self.state.decode_secs)
            event({"content": "w "})
        event({}, "length", {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.state.record({"method": self.command, "path": self.path, "status": 200, "auth": auth,
                           "body": {k: v for k, v in body.items() if k != "messages"}})

    def do_GET(self):  # noqa: N802
        self._handle()

    def do_POST(self):  # noqa: N802
        self._handle()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--record")
    parser.add_argument("--model", default="Qwen/Qwen3-8B")
    parser.add_argument("--health-503", type=int, default=0)
    parser.add_argument("--refuse-until")
    parser.add_argument("--reasoning", choices=["none", "sglang", "vllm", "inline"], default="none")
    parser.add_argument("--answer", default="4")
    parser.add_argument("--max-lifetime", type=float, default=120.0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--unhealthy", type=int, default=0)
    parser.add_argument("--unhealthy-polls", type=int, default=-1)
    parser.add_argument("--workers-body")
    parser.add_argument("--decode-ms", type=float, default=0.0)
    parser.add_argument("--metrics")
    parser.add_argument("--echo-auth", action="store_true")
    parser.add_argument("--engine-version")
    parser.add_argument("--metrics-path", default="/metrics")
    parser.add_argument("--protocols", default=" ".join(ROUTES.values()))
    parser.add_argument("--wrong-shapes", action="store_true")
    parser.add_argument("--messages-cut", action="store_true")
    args = parser.parse_args()

    Handler.state = State(args)
    # Bound at once (the port is known and reserved) but listening only once --refuse-until exists.
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    server.daemon_threads = True
    server.server_bind()
    write_port_file(server, args.port_file)

    deadline = time.monotonic() + args.max_lifetime
    # Bound but not listening: connections are refused, as while vLLM loads its weights.
    while args.refuse_until and not os.path.exists(args.refuse_until) and time.monotonic() < deadline:
        time.sleep(0.05)
    server.server_activate()
    serve_for(server, deadline - time.monotonic())

if __name__ == "__main__":
    main()
