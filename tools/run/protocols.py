"""protocols: the inference protocols a server profile may declare (SERVER_PROTOCOLS), as make probe asks them.

    python -m tools.run.protocols request PROTOCOL MODEL PROMPT MAX_TOKENS
        line 1: the protocol's route under the endpoint's /v1 (messages, responses, chat/completions);
        then, one a line, curl's words for the smallest request of that protocol asking PROMPT
        (its headers but the key, which probe.sh's curl reads from its config, and -d BODY)
    python -m tools.run.protocols check PROTOCOL ANSWER_FILE
        the answer read as that protocol's: exit 0 printing what it answered ('a message, text "4"'),
        exit 1 printing what it is not ('no Anthropic message (type "message", …: <its start>)'), or
        exit 3 for the protocol's answer cut at max_tokens before any text (a model thinking through
        the probe's whole budget: the route works, the model did not answer)

The names are harbor's (ModelApiFormat; tools/settings_rules.py SERVED_PROTOCOLS), the routes the
engines' own (tests/test_engine_routes.py reads them in each engine's route table). Each request is
what the protocol's own client sends at the least: claude-code's Anthropic requests carry
anthropic-version; the key travels as `Authorization: Bearer`, the one header the jobs proxy reads.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# protocol -> (route under /v1, headers besides Content-Type and the key)
ROUTES = {
    "openai_chat_completions": ("chat/completions", ()),
    "anthropic_messages": ("messages", ("anthropic-version: 2023-06-01",)),
    "openai_responses": ("responses", ()),
}
# An answer longer than this is not read further: the probe's answers are a few hundred bytes.
MAX_ANSWER_BYTES = 1 << 20


def body(protocol: str, model: str, prompt: str, max_tokens: int) -> dict:
    """The smallest request of PROTOCOL asking PROMPT."""
    if protocol == "anthropic_messages":
        return {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]}
    if protocol == "openai_responses":
        return {"model": model, "input": prompt, "max_output_tokens": max_tokens}
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}


def request(protocol: str, model: str, prompt: str, max_tokens: int) -> list[str]:
    route, headers = ROUTES[protocol]
    words = ["-H", "Content-Type: application/json"]
    for header in headers:
        words += ["-H", header]
    return [route, *words, "-d", json.dumps(body(protocol, model, prompt, max_tokens), separators=(",", ":"))]


def _start(raw: bytes) -> str:
    """The answer's first 200 characters on one line, for a message."""
    return re.sub(r"\s+", " ", raw[:200].decode("utf-8", errors="replace"))


def check(protocol: str, raw: bytes) -> tuple[bool | None, str]:
    """(True, what it answered) when RAW has the protocol's answer shape, (False, what it is not)
    when not, (None, why) when it is the protocol's answer cut before any text."""
    try:
        answer = json.loads(raw)
    except ValueError:
        answer = None
    if protocol == "anthropic_messages":
        content = answer.get("content") if isinstance(answer, dict) and answer.get("type") == "message" else None
        texts = [b["text"] for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
                 and isinstance(b.get("text"), str)] if isinstance(content, list) else []
        if texts:
            text = re.sub(r"\s+", " ", texts[0]).strip()[:80]
            return True, f'a message, text "{text}"'
        if isinstance(content, list) and answer.get("stop_reason") == "max_tokens":
            return None, "a message that stopped at max_tokens before any text"
        return False, f'no Anthropic message (type "message", a text block in content: {_start(raw)})'
    if protocol == "openai_responses":
        if isinstance(answer, dict) and answer.get("object") == "response" and isinstance(answer.get("output"), list):
            return True, f"a response, status {answer.get('status', '?')}"
        return False, f'no OpenAI response (object "response", an output list: {_start(raw)})'
    raise ValueError(f"the probe checks {protocol} with its own chat-completion report")


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[0] == "request" and argv[1] in ROUTES and argv[4].isdigit():
        print("\n".join(request(argv[1], argv[2], argv[3], int(argv[4]))))
        return 0
    if len(argv) == 3 and argv[0] == "check" and argv[1] in ("anthropic_messages", "openai_responses"):
        with open(argv[2], "rb") as f:
            ok, said = check(argv[1], f.read(MAX_ANSWER_BYTES))
        print(said)
        return {True: 0, False: 1, None: 3}[ok]
    print(f"protocols: usage: {Path(__file__).name} request PROTOCOL MODEL PROMPT MAX_TOKENS | check PROTOCOL FILE "
          f"(PROTOCOL one of {' '.join(ROUTES)})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
