"""pytest setup shared by the Python tests.

Tests import the repository's packages by name (`tools.tally`, `tests.fixtures.harbor_jobs`):
make setup makes the repository importable from .venv (scripts/setup.sh, tools.pth), so no
test touches sys.path.
"""

import os
import signal

# Every harbor the tests start (end to end with tests/harbor_env) runs offline: harbor 0.25.0
# sends usage telemetry when a job ends (harbor/telemetry.py) and, with no network, waits
# about 12 s for it before exiting. The tests have nothing to report.
os.environ.setdefault("HARBOR_TELEMETRY", "0")

# Tests signal their children (Ctrl-C to harbor, to the watchdog, to a launch) and expect SIGINT
# to act. A runner started in the background by a non-interactive shell (nohup make test &) has
# SIGINT ignored, and every child would inherit that: the outcome would depend on how the suite
# was launched. A handled signal is reset to its default in a child at exec; an ignored one is not.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
    """xdist_group marks kept on the pinned pytest and xdist (tests/fixtures/xdist_groups.py)."""
    from tests.fixtures import xdist_groups  # noqa: PLC0415

    if not config.pluginmanager.is_registered(xdist_groups):
        config.pluginmanager.register(xdist_groups, "xdist-groups")


def pytest_collection_modifyitems(config, items):
    """The end-to-end and full tests first, each group in its own order: run in parallel (make test), the
    longest start first and the short ones fill the gaps at the end, instead of a few long ones
    running alone on a machine that is otherwise idle."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None and item.get_closest_marker("full") is None)
