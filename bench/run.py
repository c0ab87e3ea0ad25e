"""Run the benchmark suite from a checkout: a thin wrapper over ``halojit bench``
(the suite lives in ``halojit/bench/`` so an installed wheel has it too).

    python bench/run.py [--size large|small|both] [--only NAME ...] [--peers NAME ...]
                        [--repeat 11] [--no-compile] [--out bench/results]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if any((ROOT / "halojit").glob("_rt*")):  # this checkout's halojit when its runtime is
    sys.path.insert(0, str(ROOT))  # built here; else the installed one (pip install .)

from halojit.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
