"""tools/run/protocols.py: the request make probe sends per declared protocol, and how it reads the answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.engines.routes import PROTOCOL_ROUTES
from tools.run import protocols
from tools.settings_rules import SERVED_PROTOCOLS

REPO = Path(__file__).resolve().parent.parent


def test_every_protocol_a_profile_may_declare_has_the_route_the_engine_tests_prove():
    assert list(protocols.ROUTES) == list(SERVED_PROTOCOLS)
    assert {p: ("POST", f"/v1/{route}") for p, (route, _) in protocols.ROUTES.items()} == PROTOCOL_ROUTES


def test_each_request_is_the_protocols_smallest_with_no_key_in_it():
    asked = {p: protocols.request(p, "Qwen/Qwen3.8-27B-FP8", "What is 2+2?", 512) for p in protocols.ROUTES}
    assert asked == {
        "openai_chat_completions": [
            "chat/completions", "-H", "Content-Type: application/json", "-d",
            '{"model":"Qwen/Qwen3.8-27B-FP8","messages":[{"role":"user","content":"What is 2+2?"}],"max_tokens":512}'],
        "anthropic_messages": [
            "messages", "-H", "Content-Type: application/json", "-H", "anthropic-version: 2023-06-01", "-d",
            '{"model":"Qwen/Qwen3.8-27B-FP8","max_tokens":512,"messages":[{"role":"user","content":"What is 2+2?"}]}'],
        "openai_responses": [
            "responses", "-H", "Content-Type: application/json", "-d",
            '{"model":"Qwen/Qwen3.8-27B-FP8","input":"What is 2+2?","max_output_tokens":512}'],
    }
    assert not [w for words in asked.values() for w in words if "uthorization" in w or "x-api-key" in w.lower()]


def test_an_answer_is_read_as_its_protocols_shape():
    message = {"type": "message", "role": "assistant", "content": [
        {"type": "thinking", "thinking": "2+2"}, {"type": "text", "text": "4\n\n"}], "stop_reason": "end_turn"}
    response = {"object": "response", "status": "completed", "output": [{"type": "message", "content": []}]}
    chat = {"object": "chat.completion", "choices": [{"message": {"content": "4"}}]}
    said = {
        "message": protocols.check("anthropic_messages", json.dumps(message).encode()),
        "message, thinking only": protocols.check("anthropic_messages", json.dumps(
            dict(message, content=message["content"][:1], stop_reason="max_tokens")).encode()),
        "message, no text, ended": protocols.check("anthropic_messages", json.dumps(
            dict(message, content=message["content"][:1])).encode()),
        "chat as message": protocols.check("anthropic_messages", json.dumps(chat).encode()),
        "response": protocols.check("openai_responses", json.dumps(response).encode()),
        "chat as response": protocols.check("openai_responses", json.dumps(chat).encode()),
        "not JSON": protocols.check("openai_responses", b"<html>\n<h1>502</h1>"),
    }
    assert said == {
        "message": (True, 'a message, text "4"'),
        "message, thinking only": (None, "a message that stopped at max_tokens before any text"),
        "message, no text, ended": (False, 'no Anthropic message (type "message", a text block in content: '
                                           '{"type": "message", "role": "assistant", "content": [{"type": "thinking", '
                                           '"thinking": "2+2"}], "stop_reason": "end_turn"})'),
        "chat as message": (False, 'no Anthropic message (type "message", a text block in content: '
                                   '{"object": "chat.completion", "choices": [{"message": {"content": "4"}}]})'),
        "response": (True, "a response, status completed"),
        "chat as response": (False, 'no OpenAI response (object "response", an output list: '
                                    '{"object": "chat.completion", "choices": [{"message": {"content": "4"}}]})'),
        "not JSON": (False, 'no OpenAI response (object "response", an output list: <html> <h1>502</h1>)'),
    }


def test_the_command_line_refuses_what_it_has_no_request_for(tmp_path):
    def run(*argv):
        done = subprocess.run([sys.executable, "-m", "tools.run.protocols", *argv], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        return done.returncode, done.stdout, done.stderr
    (tmp_path / "answer.json").write_text('{"object": "response", "status": "completed", "output": []}')
    assert run("check", "openai_responses", str(tmp_path / "answer.json")) == (0, "a response, status completed\n", "")
    code, out, err = run("request", "ollama_chat", "M", "hi", "5")
    assert (code, out) == (2, "")
    assert err.startswith("protocols: usage: protocols.py request PROTOCOL MODEL PROMPT MAX_TOKENS")
