"""pytest setup shared by the Python tests: the repo root on sys.path.

So tests import `tools.tally` and `tests.fixtures.harbor_jobs` as modules, whatever
directory pytest is started from.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Every harbor the tests start (end to end with tests/harbor_env) runs offline: harbor 0.25.0
# sends usage telemetry when a job ends (harbor/telemetry.py) and, with no network, waits
# about 12 s for it before exiting. The tests have nothing to report.
import os  # noqa: E402

os.environ.setdefault("HARBOR_TELEMETRY", "0")
