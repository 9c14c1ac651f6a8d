"""This repository's tools, grouped by the stage of a run they serve (docs/design.md, decision 16)."""

import os

# The tools do no linear algebra, yet numpy's OpenBLAS starts a spinning thread per core when it is
# imported: some 0.1 s of CPU on every start of a tool that estimates or draws, for nothing. A
# caller's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
