"""The one table the paper quotes instead of measuring: PyTorch PR #82544's hessian benchmark.

The table itself is kept, verbatim, in ``experiments.hessian.pr82544``, whose
experiment sets it beside its own speed-ups too. The paper shows it beside our
trimming speed-ups while the number-provenance test can tell it apart: it is
the only table whose numbers do not come from ``experiments/results/``, and it
must carry its source line (``QUOTED_MARKER`` and the PR's address) directly
above it.
"""

from __future__ import annotations

from experiments.hessian.pr82544 import PR_NAME, PR_URL, SETTING, quoted_table

QUOTED_MARKER = "Quoted, not measured here."


def source_line() -> str:
    """The line that must stand directly above the quoted table."""
    return (
        f"{QUOTED_MARKER} Source: {PR_NAME} ({PR_URL}), the benchmark table of its "
        f"description, {SETTING} result."
    )


def pr_82544_table() -> str:
    """The PR's FP32 table as Markdown, preceded by its source line."""
    return "\n".join([source_line(), "", quoted_table()])


QUOTED_TABLES = {"pr82544": pr_82544_table}
