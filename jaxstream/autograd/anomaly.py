"""Anomaly detection: NaN checks on backward outputs and forward creation tracebacks."""

from __future__ import annotations

import os
import traceback
import warnings

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _AnomalyState:
    enabled = False
    check_nan = True


state = _AnomalyState()


class detect_anomaly:
    """Context manager: check every backward output for NaN and remember, for every
    node created inside, the forward traceback that created it (shown on error)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> None:
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime "
            "and should only be enabled for debugging.",
            stacklevel=2,
        )
        self._prev = (state.enabled, state.check_nan)
        state.enabled = True
        state.check_nan = self.check_nan

    def __exit__(self, *exc: object) -> None:
        state.enabled, state.check_nan = self._prev


def is_anomaly_enabled() -> bool:
    return state.enabled


def stamp_creation(node: object) -> None:
    """Remember where `node` is being created (called only in anomaly mode)."""
    frames = [f for f in traceback.extract_stack() if not f.filename.startswith(_PACKAGE_DIR)]
    node.metadata["traceback_"] = "".join(traceback.format_list(frames))


def warn_forward_trace(node: object) -> None:
    """Show where `node` was created in the forward pass (anomaly mode only)."""
    trace = getattr(node, "_metadata", None) or {}
    trace = trace.get("traceback_")
    name = node.name()
    if trace is None:
        warnings.warn(
            f"Error detected in {name}. No forward pass information available. Enable "
            "detect_anomaly during the forward pass to see where the node was created.",
            stacklevel=2,
        )
    else:
        warnings.warn(
            f"Error detected in {name}. Traceback of forward call that caused the error:\n"
            f"{trace}",
            stacklevel=2,
        )
