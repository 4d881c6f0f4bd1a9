"""Errors raised inside a backward, and anomaly mode (a NaN found in a backward,
with the traceback of the forward that made the failing node), ported from
PyTorch's autograd test-suite.  Where PyTorch is installed the same program runs
through ``torch.autograd`` and is compared.
"""

import inspect
import os
import warnings

import numpy as np
import pytest
from helpers import arr, leaf, tt

import jaxstream as js

NAN_MESSAGE = "Function 'MulBackward0' returned nan values in its 0th output."


# ------------------------------------------------------ errors in backward


class Raises(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2.0

    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom from a custom backward")


def test_error_in_backward_keeps_type_traceback_and_gets_a_note():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="boom from a custom backward") as excinfo:
        Raises.apply(x).sum().backward()
    notes = getattr(excinfo.value, "__notes__", [])
    assert any("RaisesBackward" in note for note in notes)
    assert any(entry.name == "backward" for entry in excinfo.traceback)
    assert x.grad is None
    # the engine stays usable
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


def test_error_in_backward_under_grad_keeps_type():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="boom") as excinfo:
        js.grad(Raises.apply(x).sum(), x)
    assert any("RaisesBackward" in n for n in getattr(excinfo.value, "__notes__", []))


# ------------------------------------------------------------ anomaly mode


def _forward_that_makes_nan(x):
    w = js.tensor(np.array([np.nan, 1.0]))
    return x * w


def _forward_location():
    lines, start = inspect.getsourcelines(_forward_that_makes_nan)
    offset = next(i for i, line in enumerate(lines) if "return x * w" in line)
    return start + offset


def test_detect_anomaly_nan_message_and_forward_trace_warning():
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with js.autograd.detect_anomaly():
            y = _forward_that_makes_nan(x)
            with pytest.raises(RuntimeError) as excinfo:
                y.sum().backward()
    assert str(excinfo.value) == NAN_MESSAGE
    texts = [str(r.message) for r in records]
    line = _forward_location()
    assert any(
        "MulBackward0" in t
        and os.path.basename(__file__) in t
        and ("_forward_that_makes_nan" in t or f"line {line}" in t or f":{line}" in t)
        for t in texts
    ), texts


def test_detect_anomaly_without_nan_check_and_outside_anomaly_mode():
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with js.autograd.detect_anomaly(check_nan=False):
            _forward_that_makes_nan(x).sum().backward()
    g = arr(x.grad)
    assert np.isnan(g[0]) and g[1] == 1.0
    x.grad = None
    _forward_that_makes_nan(x).sum().backward()
    assert np.isnan(arr(x.grad)[0])


def test_detect_anomaly_error_in_backward_warns_with_forward_trace():
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with js.autograd.detect_anomaly():
            out = Raises.apply(x)
            with pytest.raises(ValueError, match="boom"):
                out.sum().backward()
    texts = [str(r.message) for r in records]
    assert any("RaisesBackward" in t and os.path.basename(__file__) in t for t in texts), texts


@pytest.mark.oracle
def test_detect_anomaly_matches_torch(torch):
    tx = tt(torch, [1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly():
            ty = tx * torch.tensor([float("nan"), 1.0], dtype=torch.float64)
            with pytest.raises(RuntimeError) as ref:
                ty.sum().backward()
            x = leaf([1.0, 2.0])
            with js.autograd.detect_anomaly():
                with pytest.raises(RuntimeError) as ours:
                    _forward_that_makes_nan(x).sum().backward()
    assert str(ours.value) == str(ref.value) == NAN_MESSAGE
