"""Virtual time's predictions beside what the GPU measured, for the GPU check's report.

streaming_backward predicts each of its rows on this machine's GPU (Note
[Virtual time] in jaxstream/devices/virtual_time.py), with the host costs that
device_overhead measured on cuda just before (``calibration``), and measures
the same rows on cuda. For every row and phase the report puts the predicted
K streams / 1 stream ratio beside the measured one, and the predicted
K-streams makespan beside the measured time, each with its error, the
prediction's verdict and host share, and whether the targets were met.
"""

from __future__ import annotations

from typing import Any

from experiments.streaming_backward.peers import PHASES
from experiments.streaming_backward.prediction import PREDICTED
from experiments.streaming_backward.table import prediction_errors

PREDICTING = "streaming_backward"
RATIO_TOLERANCE = 0.15
"""A predicted ratio within this of the measured one meets the target."""
MAKESPAN_TOLERANCE = 0.30
"""A predicted makespan within this fraction of the measured one meets the target."""
HEADERS = (
    "row", "phase", "ratio predicted / measured", "difference", "within 0.15",
    "K-streams makespan us predicted / measured", "error", "within 30%",
    "verdict", "host share",
)


def _within(error: float | None, tolerance: float) -> bool | None:
    return None if error is None else abs(error) <= tolerance


def prediction_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per row of streaming_backward's ``record`` and per phase: predicted beside measured."""
    found = []
    for row in record["rows"]:
        errors = prediction_errors(row)
        for phase in PHASES:
            measured_ms = row.get(f"cuda-k-{phase}_ms")
            difference = errors[f"{PREDICTED}-{phase}-ratio_difference"]
            error = errors[f"{PREDICTED}-{phase}-time_error"]
            found.append({
                "row": f"K = {row['branches']}" if isinstance(row["branches"], int)
                else str(row["branches"]),
                "phase": phase,
                "predicted_ratio": row.get(f"{PREDICTED}-{phase}-k_over_one"),
                "measured_ratio": row.get(f"cuda-{phase}-k_over_one"),
                "ratio_difference": difference,
                "ratio_within": _within(difference, RATIO_TOLERANCE),
                "predicted_us": row.get(f"{PREDICTED}-k-{phase}_us"),
                "measured_us": None if measured_ms is None else measured_ms * 1e3,
                "makespan_error": error,
                "makespan_within": _within(error, MAKESPAN_TOLERANCE),
                "verdict": row.get(f"{PREDICTED}-{phase}-verdict"),
                "host_share": row.get(f"{PREDICTED}-{phase}-host_share"),
            })
    return found


def _shown(value: Any, spec: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, spec)


def _cells(row: dict[str, Any]) -> list[str]:
    return [
        row["row"], row["phase"],
        f"{_shown(row['predicted_ratio'], '.2f')} / {_shown(row['measured_ratio'], '.2f')}",
        _shown(row["ratio_difference"], "+.2f"), _shown(row["ratio_within"]),
        f"{_shown(row['predicted_us'], '.0f')} / {_shown(row['measured_us'], '.0f')}",
        _shown(row["makespan_error"], "+.0%"), _shown(row["makespan_within"]),
        _shown(row["verdict"]), _shown(row["host_share"], ".0%"),
    ]


def summary(rows: list[dict[str, Any]]) -> str:
    """How many rows met each target, of those measured."""
    parts = []
    for key, target in (("ratio_within", f"the ratio within {RATIO_TOLERANCE:g} of measured"),
                        ("makespan_within", f"the makespan within {MAKESPAN_TOLERANCE:.0%}")):
        judged = [row[key] for row in rows if row[key] is not None]
        parts.append(f"{target}: {sum(judged)} of {len(judged)} measured rows"
                     if judged else f"{target}: no row measured on cuda")
    return "Targets met, " + "; ".join(parts) + "."


def predictions_markdown(rows: list[dict[str, Any]], table: Any) -> list[str]:
    """The report's lines for ``rows``; ``table`` renders a Markdown table."""
    return [
        "Predicted (virtual time, this GPU's profile and the host costs calibrated above) "
        "beside measured on cuda, K streams against one:",
        "",
        table(HEADERS, [_cells(row) for row in rows]),
        "",
        summary(rows),
        "",
    ]
