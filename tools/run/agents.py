#!/usr/bin/env python3
"""agents: how a run's agent reaches the run's own served model, read from harbor's own classes.

    python -m tools.run.agents wiring AGENT PROTOCOLS MODEL   # the run's wiring, or why it is refused
    python -m tools.run.agents list PROTOCOLS [--json]        # every agent harbor ships, decided

Nothing here is a table of agents. The agent list is harbor's (AgentFactory, `harbor agent list`);
each agent's connection is its class's MODEL_CONNECTION (ModelConnectionSpec: the formats it speaks,
the variables its key and base URL travel in), and whether it runs inside the sandbox is whether it
is a BaseInstalledAgent. From those and the server's protocols (SERVER_PROTOCOLS) the wiring is
chosen, then proven with harbor's own resolver (resolve_agent_model_connection, what the trial runs):
the AgentConfig our argv produces, with harbor's environment holding only sentinel values (and
decoys in every other candidate variable, as a user's shell might), must select our key, our base
URL, the protocol and the run's model. What this module adds is three facts about the protocols
themselves, none about an agent:

- the route each protocol's client calls, and the base URL it is given: OpenAI clients take the
  server's `<endpoint>/v1` and append /chat/completions or /responses; Anthropic clients append
  /v1/messages themselves, so they take the endpoint without /v1 (harbor's
  with_messages_client_base_url strips it the same way);
- the HF Jobs proxy in front of the server reads only `Authorization: Bearer hf_…`. OpenAI clients
  send their key so; Anthropic clients send an API key as `x-api-key`, and only an auth token
  (ANTHROPIC_AUTH_TOKEN) as a bearer;
- the provider prefixes of the model string whose route is the protocol itself, with no vendor's
  endpoint of their own (harbor's _LITELLM_API_TRANSPORTS and the openai_responses alias).

An in-sandbox agent gets its key and base URL as `--ae 'NAME=${NAME}'` templates that harbor
resolves from its own environment (docs/design.md decision 5): never a value in argv or a file.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass

import click

# Each protocol: the suffix its client is given on top of the endpoint's root (the shape of the
# base-URL variable's value), and the path the client then calls.
ROUTES = {
    "openai_chat_completions": ("/v1", "/v1/chat/completions"),
    "openai_responses": ("/v1", "/v1/responses"),
    "anthropic_messages": ("", "/v1/messages"),
}
# The protocols whose clients send some keys other than as a bearer: the variables that are a bearer.
BEARER_ONLY = {"anthropic_messages": ("ANTHROPIC_AUTH_TOKEN",)}
# Model-string prefixes whose provider route is the protocol itself (no vendor endpoint of its own).
GENERIC_PREFIXES = ("openai", "openai_responses", "anthropic")
# Formats an agent may declare that are a vendor's own API, which no engine here serves.
VENDOR_FORMATS = {"google_generate_content": "Google's Gemini API", "bedrock_converse": "AWS Bedrock's Converse API"}
# The sentinels the proof puts in harbor's environment (never a real key or server).
SENTINEL_KEY, DECOY = "tb-wiring-sentinel-key", "tb-wiring-decoy"
SENTINEL_ROOT = "http://wiring.invalid:9"
# What the proof keeps of the real environment (nothing that could name a key or an endpoint).
KEPT_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "LITELLM_LOCAL_MODEL_COST_MAP")


@dataclass(frozen=True)
class Wiring:
    """One agent's decision: wired (kind host, sandbox or none) or refused (why)."""

    agent: str
    kind: str  # host: calls the model from harbor's process; sandbox: from inside it; none; refused
    agent_class: str = ""
    protocol: str = ""
    model: str = ""  # the --model argument
    key_var: str = ""  # the variable harbor's environment holds the key in (an --ae template for sandbox)
    key_dest: str = ""  # where harbor hands it to the agent
    url_var: str = ""
    url_shape: str = ""  # the endpoint as served (/v1) or its root (Anthropic clients)
    route: str = ""
    why: str = ""

    @property
    def forwarded(self) -> tuple[str, ...]:
        """The variables forwarded into the sandbox as --ae templates, key first."""
        return (self.key_var, self.url_var) if self.kind == "sandbox" else ()

    def line(self) -> str:
        """The one line make print says about it."""
        if self.kind == "refused":
            return f"{self.agent}: refused: {self.why}"
        if self.kind == "none":
            return f"{self.agent} calls no model ({self.agent_class}: MODEL_CONNECTION is None): no key, no base URL"
        where = "inside the sandbox (--ae templates)" if self.kind == "sandbox" else "from harbor's own process"
        shape = "the endpoint without /v1" if self.url_shape == "root" else "the endpoint"
        return (f"{self.agent} calls the model {where} in {self.protocol} at the server's {self.route}: key in "
                f"{self.key_dest} (Authorization: Bearer), base URL in {self.url_var} ({shape}), --model {self.model}; "
                f"as {self.agent_class}.MODEL_CONNECTION declares (harbor's resolver)")


def harbor_version() -> str:
    from importlib.metadata import version  # noqa: PLC0415

    return version("harbor")


def agent_names() -> list[str]:
    """The agents harbor ships, as `harbor agent list` lists them."""
    from harbor.agents.factory import AgentFactory  # noqa: PLC0415

    return AgentFactory.registered_names()


def agent_class(name: str) -> type:
    from harbor.agents.factory import AgentFactory  # noqa: PLC0415
    from harbor.models.agent.name import AgentName  # noqa: PLC0415

    return AgentFactory.get_agent_class(AgentName(name))


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def in_sandbox(cls: type) -> bool:
    from harbor.agents.installed.base import BaseInstalledAgent  # noqa: PLC0415

    return issubclass(cls, BaseInstalledAgent)


def format_value(fmt: object) -> str:
    return getattr(fmt, "value", str(fmt))


def preferred_formats(spec) -> list[str]:
    """The formats the agent declares, its own default first (for its default provider, else 'default')."""
    declared = [format_value(f) for f in spec.supported_api_formats]
    by_provider = {str(k): format_value(v) for k, v in spec.default_api_format_by_provider.items()}
    default = by_provider.get(spec.default_provider or "default", by_provider.get("default"))
    return ([default] if default in declared else []) + [f for f in declared if f != default]


def prefixes(protocol: str) -> list[str]:
    """The generic providers whose declared routes include PROTOCOL (harbor's PROVIDERS)."""
    from harbor.agents.agent_auth_resolution import PROVIDERS, provider_aliases  # noqa: PLC0415

    aliases = provider_aliases()
    return [p for p in GENERIC_PREFIXES
            if protocol in {format_value(f) for f in PROVIDERS[aliases.get(p, p)].base_urls}]


@contextlib.contextmanager
def environment(values: dict[str, str]):
    """os.environ holding only VALUES and the harmless KEPT_ENV, for harbor's resolver; restored after."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update({k: saved[k] for k in KEPT_ENV if k in saved}, **values)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def resolve(agent: str, model: str, forwarded: tuple[str, ...], ambient: dict[str, str]):
    """harbor's own resolution of the AgentConfig our argv produces (--agent, --model, --ae templates)."""
    from harbor.agents.agent_auth_resolution import resolve_agent_model_connection  # noqa: PLC0415
    from harbor.models.trial.config import AgentConfig  # noqa: PLC0415

    config = AgentConfig(name=agent, model_name=model, env={n: "${" + n + "}" for n in forwarded})
    with environment(ambient):
        return resolve_agent_model_connection(config)


def candidates(agent: str, model: str) -> tuple[list[str], list[str]]:
    """The key and base-URL variables harbor's resolver would read for this model string, in its order."""
    conn = resolve(agent, model, (), {})
    return list(conn.api_key_candidate_names), list(conn.base_url_candidate_names)


def prove(agent: str, sandbox: bool, protocol: str, model: str, served_model: str, key_var: str,
          url_var: str, others: list[str]) -> tuple[str | None, str]:
    """(None, key destination) when harbor's resolver selects exactly this wiring; else (why not, '')."""
    from harbor.agents.agent_auth_resolution import PROVIDERS  # noqa: PLC0415

    suffix = ROUTES[protocol][0]
    url = SENTINEL_ROOT + suffix
    ambient = {name: DECOY for name in others} | {key_var: SENTINEL_KEY, url_var: url}
    try:
        conn = resolve(agent, model, (key_var, url_var) if sandbox else (), ambient)
    except ValueError as err:
        return f"harbor's resolver refuses it ({str(err).splitlines()[0]})", ""
    access = PROVIDERS.get(conn.provider or "")
    got = format_value(conn.model_api_format) if conn.model_api_format else (
        format_value(access.default_api_format) if access and access.default_api_format else None)
    dest = conn.api_key_destination_name or ""
    if got != protocol:
        return f"with --model {model} harbor selects {got or 'no protocol'}, not {protocol}", ""
    if conn.api_key != SENTINEL_KEY or conn.api_key_source_name != key_var:
        return f"harbor does not take its key from {key_var}", ""
    if protocol in BEARER_ONLY and dest not in BEARER_ONLY[protocol]:
        return (f"its key would reach it in {dest or 'no variable'}, which {protocol} clients send as x-api-key; the "
                "HF Jobs proxy reads only Authorization: Bearer"), ""
    if conn.execution_base_url != url:
        return f"harbor does not hand it the base URL from {url_var} as given", ""
    if sandbox and (not conn.base_url_destination_names or conn.env.get(dest) != SENTINEL_KEY):
        return (f"harbor hands it the base URL for {protocol} only through its own configuration (a file or a flag it "
                "writes), not an environment variable"), ""
    if conn.model_id != served_model:
        return f"harbor would send the model as '{conn.model_id}', not the served '{served_model}'", ""
    return None, dest


def decide(agent: str, protocols: list[str], served_model: str) -> Wiring:
    """The wiring of AGENT against a server serving PROTOCOLS and the model SERVED_MODEL, or why it is refused."""
    if agent not in agent_names():
        return Wiring(agent, "refused", why=f"AGENT={agent} is not an agent harbor {harbor_version()} ships "
                                            "(harbor agent list)")
    cls = agent_class(agent)
    path, spec, sandbox = class_path(cls), cls.MODEL_CONNECTION, in_sandbox(cls)
    if spec is None:
        if not sandbox:
            return Wiring(agent, "none", path)
        return Wiring(agent, "refused", path, why=(
            f"harbor declares no model connection for it ({path}.MODEL_CONNECTION is None): it reaches its model "
            "its own way (a vendor login or its own configuration), so no key or base URL can be handed to it"))
    formats = preferred_formats(spec)
    usable = [f for f in formats if f in protocols]
    if not usable:
        vendor = [f"{f} is {VENDOR_FORMATS[f]}" for f in formats if f in VENDOR_FORMATS]
        return Wiring(agent, "refused", path, why=(
            f"it speaks {' '.join(formats) or 'no protocol harbor names'}, and this server serves "
            f"{' '.join(protocols)}" + (f" ({'; '.join(vendor)}, which no engine here serves)" if vendor else "")))
    reasons = []
    for protocol in usable:
        for prefix in prefixes(protocol):
            model = f"{prefix}/{served_model}"
            try:
                keys, urls = candidates(agent, model)
            except ValueError as err:
                reasons.append(f"{protocol}: {str(err).splitlines()[0]}")
                continue
            for key_var in keys:
                for url_var in urls:
                    others = [n for n in keys + urls if n not in (key_var, url_var)]
                    why, dest = prove(agent, sandbox, protocol, model, served_model, key_var, url_var, others)
                    if why is None:
                        return Wiring(agent, "sandbox" if sandbox else "host", path, protocol, model, key_var, dest,
                                      url_var, "root" if not ROUTES[protocol][0] else "v1", ROUTES[protocol][1])
                    reasons.append(f"{protocol}: {why}")
            if not keys or not urls:
                reasons.append(f"{protocol}: harbor names no {'key' if not keys else 'base-URL'} variable for it")
    return Wiring(agent, "refused", path, why=reasons[0] if len(set(reasons)) == 1 else
                  "; ".join(dict.fromkeys(reasons)))


def decide_all(protocols: list[str], served_model: str) -> list[Wiring]:
    return [decide(name, protocols, served_model) for name in agent_names()]


def allowed(protocols: list[str], served_model: str) -> list[str]:
    return [w.agent for w in decide_all(protocols, served_model) if w.kind != "refused"]


def shell_lines(w: Wiring) -> str:
    """The wiring as NAME<TAB>VALUE lines for scripts/argv.sh (agent_wiring)."""
    fields = {"kind": w.kind, "class": w.agent_class, "protocol": w.protocol, "model": w.model,
              "key_var": w.key_var, "key_dest": w.key_dest, "url_var": w.url_var, "url_shape": w.url_shape,
              "route": w.route, "forwarded": " ".join(w.forwarded), "line": w.line()}
    return "".join(f"{k}\t{v}\n" for k, v in fields.items())


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network for LiteLLM's cost map


@cli.command("wiring")
@click.argument("agent")
@click.argument("protocols")
@click.argument("model")
def wiring_cmd(agent: str, protocols: str, model: str) -> None:
    """Print AGENT's wiring against a server of PROTOCOLS serving MODEL; refuse it with why and the fix."""
    served = protocols.split()
    w = decide(agent, served, model)
    if w.kind == "refused":
        ok = allowed(served, model)
        raise click.ClickException(
            f"AGENT={agent} is refused: {w.why}. Pick an agent this server's protocols ({' '.join(served)}) allow: "
            f"{' '.join(ok)} (docs/agents.md)")
    click.echo(shell_lines(w), nl=False)


@cli.command("list")
@click.argument("protocols")
@click.option("--model", default="Qwen/Qwen3.8-27B-FP8", show_default=True, help="the served model's name")
@click.option("--json", "as_json", is_flag=True, help="one JSON array of every decision")
def list_cmd(protocols: str, model: str, as_json: bool) -> None:
    """Every agent harbor ships, decided against a server of PROTOCOLS."""
    decisions = decide_all(protocols.split(), model)
    if as_json:
        click.echo(json.dumps([asdict(w) for w in decisions], indent=1))
        return
    for w in decisions:
        click.echo(w.line())


if __name__ == "__main__":
    cli()
