"""The paper's Figures 6, 8 and 9 with the real protocols in virtual time, beside the discrete-event model.

    PYTHONHASHSEED=0 python benchmarks/detsim_figures.py [--figures 6,9,8] [--quick] [--out runs/figures]

Writes figures.txt (the tables), figures.json and, where matplotlib is installed, figures.png.
Every number is virtual time (deterministic for one PYTHONHASHSEED); the "real CPU s" column is this
machine's CPU time for the real-code run. See actorflow/sim/figures.py for what each figure runs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actorflow.sim.figures import main  # noqa: E402

if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: PYTHONHASHSEED is not 0; runs are deterministic within this process only", file=sys.stderr)
    sys.exit(main())
