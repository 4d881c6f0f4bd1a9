"""The one table the paper quotes instead of measuring: PyTorch PR #82544's hessian benchmark.

It is kept here, verbatim, so that the paper can set it beside our own
trimming speed-ups while the number-provenance test can tell it apart: it is
the only table whose numbers do not come from ``experiments/results/``, and it
must carry its source line (``QUOTED_MARKER`` and the PR's address) directly
above it.
"""

from __future__ import annotations

from experiments.hessian import PR_URL

QUOTED_MARKER = "Quoted, not measured here."
PR_NAME = "PyTorch PR #82544"

PR_82544_SETTING = '"6 hidden layers, batch size 10000, on A100", FP32 result'
PR_82544_HEADER = ("hessian benchmark", "FP32 (before)", "FP32 (After)", "FP32 (Functorch v0.1.1)")
PR_82544_ROWS = (
    ("Linear + ReLU (no backward)", "55.658 ms", "29.392 ms (1.90X)", "29.547 ms (1.90X)"),
    ("Linear + ReLU (with backward)", "81.173 ms", "54.917 ms (1.47X)", "68.988 ms (1.18X)"),
)


def source_line() -> str:
    """The line that must stand directly above the quoted table."""
    return (
        f"{QUOTED_MARKER} Source: {PR_NAME} ({PR_URL}), the benchmark table of its "
        f"description, {PR_82544_SETTING}."
    )


def pr_82544_table() -> str:
    """The PR's FP32 table as Markdown, preceded by its source line."""
    lines = [source_line(), ""]
    lines.append("| " + " | ".join(PR_82544_HEADER) + " |")
    lines.append("|" + "|".join("---" for _ in PR_82544_HEADER) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in PR_82544_ROWS]
    return "\n".join(lines)


QUOTED_TABLES = {"pr82544": pr_82544_table}
