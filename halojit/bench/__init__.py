"""The benchmark suite (``halojit bench``, ``bench/run.py``): halojit against
numpy, numexpr, numba, JAX and torch.compile on the same inputs, checked
against numpy, with a measured bandwidth roofline and issue 4's targets.

    from halojit.bench import run, report
    result = report.summarize(run(sizes=("small",), repeat=3))
    print(report.render(result))
"""

from . import report
from .cli import add_arguments, main
from .suite import run

__all__ = ["run", "report", "main", "add_arguments"]
