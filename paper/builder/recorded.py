"""What a record may lack because it was written before the field existed, and how to say so.

Note [Records older than their fields]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A record names the schema it was written with (``schema_version``). Schema 2
added the intervals of the ratios, the verdicts, the environment, the fastest
eager configuration's name, the cores each peer used, the readings of intervals
against a prediction or against 1, and the hessian experiment's ReLU rows, its
rows in PR #82544's form, its torch.func peer and the PR's setting. Schema 3
added the host side of virtual time to streaming_backward's predictions (their
keys renamed from the H100's to "predicted", a verdict and the host's share per
phase, and the host costs among the parameters). A placeholder that asks a
record for such a field or row, where the record's schema predates it, is
shown as not recorded, naming the command that records it, and a table's
column keyed by such a field is left out, with a line that says so; every other
missing field is an error, so a mistyped placeholder still stops the build, and
once every record is rerun nothing is shown as not recorded. ``ADDED_IN`` lists
the fields the template may ask of an older record, by any key of their path or
the value a row is selected by (``rows[key=VALUE]``), and the notes, by the
prefix a ``note`` placeholder gives.
"""

from __future__ import annotations

from typing import Any

INTERVALS_SINCE = 2
ADDED_IN = {
    **dict.fromkeys(
        (
            "jaxstream_best",
            "jaxstream_best_cores",
            "torch_ms_cores",
            "compile_trimming_against_one",
            "off_path_against_prediction",
            "torch-func_over_torch",
            "jaxstream-numpy_speedup_verdict",
            "jaxstream-jax_speedup_verdict",
            "jaxstream_best_over_torch_verdict",
            "pr82544",
            "hessian_pr",
            "relu hessian",
            "relu hessian_pr",
            "relu training",
            "Forms",
            "ReLU",
        ),
        2,
    ),
    **dict.fromkeys(
        (
            *(
                f"predicted-{what}"
                for phase in ("forward", "backward")
                for what in (f"k-{phase}_us", f"{phase}-k_over_one", f"{phase}-verdict",
                             f"{phase}-host_share")
            ),
            "prediction_host",
        ),
        3,
    ),
}
"""Fields, rows (by the key they are selected by) and notes (by the prefix the paper cites them
by) that a record older than the version given does not hold."""


def schema(record: dict[str, Any]) -> int:
    return int(record.get("schema_version", 1))


def has_intervals(record: dict[str, Any]) -> bool:
    """Whether the record's ratios carry intervals (Note [Bootstrap intervals of ratios] in
    experiments/harness/intervals.py)."""
    return schema(record) >= INTERVALS_SINCE


def predates(record: dict[str, Any], path: str) -> bool:
    """Whether the record lacks what the dotted ``path`` names only because its schema
    predates a key of the path, or the value one of its rows is selected by."""
    for part in path.split("."):
        name, _, selector = part.partition("[")
        wanted = selector.removesuffix("]").partition("=")[2]
        for added in (name, wanted):
            if added in ADDED_IN and schema(record) < ADDED_IN[added]:
                return True
    return False


def not_recorded(name: str) -> str:
    """What the paper shows for a field its record predates."""
    return f"(not recorded: rerun `python -m experiments run {name}`)"


def columns_not_recorded(name: str, keys: list[str]) -> str:
    """The line under a table whose columns keyed ``keys`` its record predates."""
    return (f"*Not recorded in this record, which predates them: the columns "
            f"{', '.join(f'`{key}`' for key in keys)}; rerun `python -m experiments run {name}` "
            "to get them.*")


INTERVAL_NOT_RECORDED = "(interval not recorded)"
TABLE_WITHOUT_INTERVALS = (
    "*Intervals: not recorded in this record, which predates them; rerun the experiment "
    "(`python -m experiments run {name}`) to get them.*"
)
