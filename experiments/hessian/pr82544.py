"""PyTorch PR #82544, which the hessian experiment follows: its address, its setting, the
settings of its snippet, what it does not say, and its benchmark table, quoted verbatim,
which the experiment's appendix and the paper both show.

The PR states its setting in one line above its table (``SETTING``) and shows the
form of its two grads in a snippet (``SNIPPET``). It does not give the hidden
width, the input size, or what a time covers and how it was taken
(``NOT_RECORDED``), so our sizes are our own and only ratios compare.
"""

from __future__ import annotations

from typing import Any

from experiments.harness import peer_table
from experiments.workloads.hessian_model import PR_FORM

PR_NAME = "PyTorch PR #82544"
PR_URL = "https://github.com/pytorch/pytorch/pull/82544"
PR_SPEEDUPS = {"hessian": 1.90, "training": 1.47}
"""The PR's speed-ups from trimming, FP32, by the variant of ours its row corresponds to."""
BESIDE = {"hessian": "hessian", PR_FORM: "hessian", "training": "training"}
"""Our variant -> the PR's row it sits beside: its "no backward" row beside A and A', its
"with backward" row beside B."""

SETTING = '"6 hidden layers, batch size 10000, on A100", FP32'
HEADER = ("hessian benchmark", "FP32 (before)", "FP32 (After)", "FP32 (Functorch v0.1.1)")
ROWS = (
    ("Linear + ReLU (no backward)", "55.658 ms", "29.392 ms (1.90X)", "29.547 ms (1.90X)"),
    ("Linear + ReLU (with backward)", "81.173 ms", "54.917 ms (1.47X)", "68.988 ms (1.18X)"),
)
PARAMETERS = {
    "hidden_layers": 6,
    "batch": 10_000,
    "activation": "relu",
    "dtype": "float32",
    "device": "NVIDIA A100",
    "engine": "PyTorch's C++ autograd engine, before and after the PR",
    "functional_peer": "functorch v0.1.1",
}
"""The setting the PR states (``SETTING`` and ``HEADER``), as fields."""
SNIPPET = {
    "create_graph": "True on both grads",
    "grad_outputs": "passed to both grads",
    "ours": "variant A's second grad runs without create_graph (nothing differentiates h); "
    "variant A' takes the snippet's form; B needs create_graph on both",
}
"""The settings of the PR's snippet of its two grads."""
NOT_RECORDED = (
    "the hidden width",
    "the input size",
    "what a time covers (the forward, the grads, a synchronization)",
    "how many repetitions a time is, and which statistic",
)
"""What the PR does not say about its benchmark."""


def _milliseconds(cell: str) -> float:
    """A quoted cell's time: "29.392 ms (1.90X)" -> 29.392."""
    return float(cell.split()[0])


def functorch_over_after() -> dict[str, float]:
    """The PR's functorch time over its trimmed eager time, by the variant of ours its row
    corresponds to, from the quoted table: what our torch.func / PyTorch eager compares to."""
    return {
        variant: _milliseconds(functorch) / _milliseconds(after)
        for variant, (_, _, after, functorch) in zip(PR_SPEEDUPS, ROWS, strict=True)
    }


def pr_record() -> dict[str, Any]:
    """The PR's setting, its snippet's settings and what it leaves out, for the record."""
    return {
        "name": PR_NAME,
        "url": PR_URL,
        "setting": SETTING,
        **PARAMETERS,
        "snippet": SNIPPET,
        "not_recorded": list(NOT_RECORDED),
        "speedups": PR_SPEEDUPS,
        "functorch_over_after": functorch_over_after(),
        "beside": BESIDE,
    }


_BESIDE_HEADER = (
    "| variant | batch | PR #82544 speed-up | jaxstream (NumPy) speed-up | jaxstream (JAX) "
    "speed-up | PR #82544 functorch / after | torch.func / PyTorch eager |"
)


def quoted_table() -> str:
    """The PR's FP32 benchmark table as Markdown, as published."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in ROWS]
    return "\n".join(lines)


def beside_the_pr(rows: list[dict[str, Any]]) -> str:
    """The experiment's appendix: the PR's table, then its ratios beside ours."""

    def ratio(row: dict[str, Any], name: str) -> str:
        return peer_table.ratio_column("", name).render(row)

    functorch = functorch_over_after()
    ours = "\n".join(
        f"| {row['variant']} | {row['batch']:,} | {PR_SPEEDUPS[BESIDE[row['variant_key']]]:.2f}x "
        f"| {ratio(row, 'jaxstream-numpy_speedup')} | {ratio(row, 'jaxstream-jax_speedup')} "
        f"| {functorch[BESIDE[row['variant_key']]]:.2f}x | {ratio(row, 'torch-func_over_torch')} |"
        for row in rows
    )
    return f"""## Beside {PR_NAME}

Source: the benchmark table in the description of {PR_NAME} ({PR_URL}),
{SETTING}. The PR does not give {', '.join(NOT_RECORDED[:-1])} or {NOT_RECORDED[-1]}:
our sizes are our own, so compare ratios, not times. Its snippet passes
create_graph=True to both grads; variant A' does the same, variant A (ours) does
not on the second, and B needs it on both. Its layers were Linear + ReLU, whose
input Hessian is zero almost everywhere; we run ReLU beside tanh.

{quoted_table()}

Speed-up from trimming (PR: before / after; ours: off / on, as median / min / CPU), and the
functional peer against trimmed eager (PR: functorch / after; ours: torch.func / PyTorch
eager):

{_BESIDE_HEADER}
|---|---|---|---|---|---|---|
{ours}
"""
