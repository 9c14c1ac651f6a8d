#!/usr/bin/env python3
"""environments: which harbor environments would put an agent's key in a local process's argv.

    python -m tools.environments argv-exposure ENV_TYPE

An installed agent (mini-swe-agent) runs inside the task environment, and its key travels in
the environment harbor merges for each exec (BaseEnvironment._merge_env, where --ae lands).
Some environments hand that environment to a local command as arguments, where every local
user reads it (ps, /proc/<pid>/cmdline). In harbor 0.25.0 (tests/test_no_secret_in_argv.py
re-reads these sources):

  DockerEnvironment._compose_exec            docker compose ... exec -e KEY=value
    (harbor/environments/docker/docker.py), and every subclass: PodmanEnvironment, KataEnvironment
  DockerSandboxesEnvironment's local CLI     docker sandbox exec --env KEY=value
    (harbor/environments/sbx/local.py)
  AppleContainerEnvironment.exec             container exec -e KEY=value
    (harbor/environments/apple_container.py)

The check is by class, with issubclass, never by the ENV_TYPE string: a module:Class import path
to one of these classes or to a subclass is the same risk. Prints the class and what it runs when
ENV_TYPE is one of them, nothing when it is not; exit 0 either way. Exit 1, with one line, when
ENV_TYPE names no environment class this harbor can load: nothing could be checked.
"""

from __future__ import annotations

import click

# The classes whose exec puts the merged environment in a local argv, and what that argv is.
EXPOSING = {
    "harbor.environments.docker.docker:DockerEnvironment": "docker compose ... exec -e KEY=value",
    "harbor.environments.sbx.environment:DockerSandboxesEnvironment": "docker sandbox exec --env KEY=value",
    "harbor.environments.apple_container:AppleContainerEnvironment": "container exec -e KEY=value",
}


def load_class(path: str) -> type:
    from harbor.utils.import_path import import_symbol  # noqa: PLC0415  (heavy: only when asked)

    return import_symbol(path)


def environment_class(env_type: str) -> type:
    """ENV_TYPE's class, as harbor itself resolves it: a registered name, or a module:Class path."""
    from harbor.environments.factory import _load_environment_class  # noqa: PLC0415
    from harbor.models.environment_type import EnvironmentType  # noqa: PLC0415

    if ":" in env_type:
        cls = load_class(env_type)
    else:
        cls = _load_environment_class(EnvironmentType(env_type))
    if not isinstance(cls, type):
        raise ValueError(f"{env_type} is not a class")
    return cls


def argv_exposure(cls: type) -> str | None:
    """What `cls` runs locally with the environment in its argv, or None when it does not."""
    for path, argv in EXPOSING.items():
        if issubclass(cls, load_class(path)):
            return f"{cls.__module__}:{cls.__qualname__} (a {path.rpartition(':')[2]}) runs '{argv}'"
    return None


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("argv-exposure")
@click.argument("env_type")
def argv_exposure_cmd(env_type: str) -> None:
    """Print how ENV_TYPE's exec puts the environment in a local argv; nothing when it does not."""
    try:
        cls = environment_class(env_type)
    except (ImportError, ValueError, AttributeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise click.ClickException(f"cannot load the environment class of ENV_TYPE={env_type}: {first}") from None
    exposure = argv_exposure(cls)
    if exposure:
        click.echo(exposure)


if __name__ == "__main__":
    cli()
