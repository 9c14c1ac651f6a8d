"""pytest setup shared by the Python tests: the repo root on sys.path.

So tests import `tools.tally` and `tests.fixtures.harbor_jobs` as modules, whatever
directory pytest is started from.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
