"""PyTorch PR #82544, which the hessian experiment follows: its address, its speed-ups and its
benchmark table, quoted verbatim, which the experiment's appendix and the paper both show."""

from __future__ import annotations

from typing import Any

from experiments.harness import peer_table

PR_NAME = "PyTorch PR #82544"
PR_URL = "https://github.com/pytorch/pytorch/pull/82544"
PR_SPEEDUPS = {"hessian": 1.90, "training": 1.47}
"""The PR's speed-ups from trimming, FP32, by variant of the experiment."""

SETTING = '"6 hidden layers, batch size 10000, on A100", FP32'
HEADER = ("hessian benchmark", "FP32 (before)", "FP32 (After)", "FP32 (Functorch v0.1.1)")
ROWS = (
    ("Linear + ReLU (no backward)", "55.658 ms", "29.392 ms (1.90X)", "29.547 ms (1.90X)"),
    ("Linear + ReLU (with backward)", "81.173 ms", "54.917 ms (1.47X)", "68.988 ms (1.18X)"),
)


def quoted_table() -> str:
    """The PR's FP32 benchmark table as Markdown, as published."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in ROWS]
    return "\n".join(lines)


def beside_the_pr(rows: list[dict[str, Any]]) -> str:
    """The experiment's appendix: the PR's table, then its speed-ups beside ours."""

    def speedup(row: dict[str, Any], backend: str) -> str:
        return peer_table.ratio_column("", f"jaxstream-{backend}_speedup").render(row)

    ours = "\n".join(
        f"| {row['variant']} | {row['batch']:,} | {PR_SPEEDUPS[row['variant_key']]:.2f}x | "
        f"{speedup(row, 'numpy')} | {speedup(row, 'jax')} |"
        for row in rows
    )
    return f"""## Beside {PR_NAME}

Source: the benchmark table in the description of {PR_NAME} ({PR_URL}),
{SETTING}. The PR's layers were
Linear + ReLU on a GPU; ours are Linear + tanh (a ReLU network's input Hessian is
zero almost everywhere), so compare speed-ups, not times.

{quoted_table()}

Speed-up from trimming (PR: time before / after; ours: off / on, as median / min / CPU):

| variant | batch | PR #82544 (A100, PyTorch, batch 10,000) | jaxstream (NumPy) | jaxstream (JAX) |
|---|---|---|---|---|
{ours}
"""
