#!/usr/bin/env python3
"""environments: on which harbor environments an in-sandbox agent may carry its key.

    python -m tools.hub.environments key-refusal ENV_TYPE

An installed agent (every BaseInstalledAgent: mini-swe-agent, claude-code, codex, …; tools/run/agents.py)
runs inside the task environment, and its key travels in
the environment harbor merges for each exec (BaseEnvironment._merge_env, where --ae lands).
Many environments hand that environment to a local command as arguments, where every local
user reads it (ps, /proc/<pid>/cmdline). So the rule is default-deny: the agent is allowed only
on an environment class whose exec path was read and found to pass the environment as data, and
on no other class, present or future.

Allowed, read in harbor 0.26.0 (tests/test_no_secret_in_argv.py re-reads these sources):

  HFSandboxEnvironment.exec (harbor/environments/hf_sandbox.py)
    sandbox.run(["/bin/bash", "-c", command], env=env) with huggingface_hub's Sandbox.run
    (huggingface_hub/_sandbox.py), which puts env in the JSON body of its POST /exec: no local
    process is started. upload_dir and download_dir run through the same exec.
  ScriptedEnv.exec (this repository's tests/harbor_env/scripted_env.py, the test environment)
    returns a scripted result and starts no process at all. Matched by the file that defines it,
    never by its import path: another module named scripted_env is not it.

Each is allowed as that class exactly: a subclass, by import path or not, can change how exec
runs, so it is refused. Refused with what they run locally, as read in harbor 0.26.0:

  DockerEnvironment._compose_exec            docker compose ... exec -e KEY=value
    (harbor/environments/docker/docker.py), and every subclass: PodmanEnvironment, KataEnvironment
  DockerSandboxesEnvironment's local CLI     docker sandbox exec --env KEY=value
    (harbor/environments/sbx/local.py)
  AppleContainerEnvironment.exec             container exec -e KEY=value
    (harbor/environments/apple_container.py)
  EC2Environment.exec → _EC2ComposeOps._exec_main_detached → EC2Environment._ssh_exec
    (harbor/environments/ec2.py)             ssh ... docker compose exec -e KEY=value
  OpenshiftEnvironment.exec → _run_oc_command
    (harbor/environments/openshift.py)       oc exec POD ... -- bash -c 'export KEY=value && ...'

Every other class (the vendor-SDK environments, whose SDKs this repository neither installs nor
has read, the kubectl ones, a module:Class of your own) is refused as not known to keep the key
out of a local argv: among them the four harbor 0.26.0 added, snowflake, boxd, superserve and
aca-sandbox (the last also runs the local az CLI). Prints nothing when ENV_TYPE is allowed, the reason when it is refused;
exit 0 either way. Exit 1, with one line, when ENV_TYPE names a module:Class this harbor cannot
load: nothing could be checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[2]

# The classes whose exec passes the environment to the sandbox as data, never in a local argv.
PASSES_ENV_AS_DATA = ("harbor.environments.hf_sandbox:HFSandboxEnvironment",)
# This repository's test environment, by the file that defines it and its name there.
TEST_ENVIRONMENT = (REPO / "tests" / "harbor_env" / "scripted_env.py", "ScriptedEnv")

# The classes whose exec puts the merged environment in a local argv, and what that argv is.
EXPOSING = {
    "harbor.environments.docker.docker:DockerEnvironment": "docker compose ... exec -e KEY=value",
    "harbor.environments.sbx.environment:DockerSandboxesEnvironment": "docker sandbox exec --env KEY=value",
    "harbor.environments.apple_container:AppleContainerEnvironment": "container exec -e KEY=value",
    "harbor.environments.ec2:EC2Environment": "ssh ... docker compose exec -e KEY=value",
    "harbor.environments.openshift:OpenshiftEnvironment": "oc exec POD ... -- bash -c 'export KEY=value && ...'",
}

ALLOWED_NAMES = "ENV_TYPE=hf-sandbox"


def load_class(path: str) -> type:
    from harbor.utils.import_path import import_symbol  # noqa: PLC0415  (heavy: only when asked)

    return import_symbol(path)


def known_class(path: str) -> type | None:
    """One of the classes named above, or None when it cannot load here: then no class is it, or derives from it."""
    try:
        return load_class(path)
    except (ImportError, ValueError, AttributeError):
        return None


def derives(cls: type, path: str) -> bool:
    base = known_class(path)
    return base is not None and issubclass(cls, base)


def registered_path(env_type: str) -> str | None:
    """The module:Class harbor registers for the name ENV_TYPE, or None when it registers none."""
    from harbor.environments.factory import _ENVIRONMENT_REGISTRY  # noqa: PLC0415
    from harbor.models.environment_type import EnvironmentType  # noqa: PLC0415

    try:
        entry = _ENVIRONMENT_REGISTRY[EnvironmentType(env_type)]
    except (ValueError, KeyError):
        return None
    return f"{entry.module}:{entry.class_name}"


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def is_test_environment(cls: type) -> bool:
    """CLS is ScriptedEnv as tests/harbor_env/scripted_env.py defines it (not a namesake, not a subclass)."""
    module = sys.modules.get(cls.__module__)
    where = getattr(module, "__file__", None)
    path, name = TEST_ENVIRONMENT
    return (where is not None and Path(where).resolve() == path and cls.__qualname__ == name
            and getattr(module, name, None) is cls)


def class_refusal(cls: type, key: str = "OPENAI_API_KEY") -> str | None:
    """Why an in-sandbox agent's key (in variable KEY) is refused on CLS, or None when CLS is known to keep it out of argv."""
    if is_test_environment(cls) or any(cls is known_class(p) for p in PASSES_ENV_AS_DATA):
        return None
    name = class_path(cls)
    for path, argv in EXPOSING.items():
        if derives(cls, path):
            return (f"{name} (a {path.rpartition(':')[2]}) runs '{argv}', so its key ({key}=<token>) "
                    "would sit in a local process's argv, readable by every local user (ps)")
    for path in PASSES_ENV_AS_DATA:
        if derives(cls, path):
            return (f"{name} is a subclass of {path.rpartition(':')[2]}, and a subclass can change how exec runs: "
                    f"only {path} itself is known to keep its key ({key}=<token>) out of every local argv")
    return unknown_refusal(name, key)


def unknown_refusal(name: str, key: str = "OPENAI_API_KEY") -> str:
    return (f"{name} is not an environment known to keep its key ({key}=<token>) out of every local "
            f"process's argv (only {ALLOWED_NAMES} is: tools/hub/environments.py says why)")


def refusal(env_type: str, key: str = "OPENAI_API_KEY") -> str | None:
    """Why ENV_TYPE (a name harbor registers, or a module:Class path) refuses an in-sandbox key; None if allowed.

    A registered name whose module cannot load here (its vendor SDK is not installed) is refused
    all the same: default-deny needs no import. A module:Class that cannot load raises.
    """
    path = registered_path(env_type)
    if path is None:
        cls = load_class(env_type)
    else:
        cls = known_class(path)
        if cls is None:
            return unknown_refusal(path, key)
    if not isinstance(cls, type):
        raise ValueError(f"{env_type} is not a class")
    return class_refusal(cls, key)


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("key-refusal")
@click.argument("env_type")
@click.option("--key", default="OPENAI_API_KEY", show_default=True,
              help="the variable the agent's key travels in (tools/run/agents.py), named in the reason")
def key_refusal_cmd(env_type: str, key: str) -> None:
    """Print why an in-sandbox agent's key is refused on ENV_TYPE; nothing when it is allowed."""
    try:
        reason = refusal(env_type, key)
    except (ImportError, ValueError, AttributeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise click.ClickException(f"cannot load the environment class of ENV_TYPE={env_type}: {first}") from None
    if reason:
        click.echo(reason)


if __name__ == "__main__":
    cli()
