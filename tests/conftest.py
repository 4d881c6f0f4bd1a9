"""Shared test set-up: hardware-gated markers and engine hygiene between tests."""

from __future__ import annotations

import importlib.util

import pytest


def _cuda_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    has_cuda = _cuda_available()
    has_torch = importlib.util.find_spec("torch") is not None
    for item in items:
        if "cuda" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU with CuPy; none present"))
        if "oracle" in item.keywords and not has_torch:
            item.add_marker(pytest.mark.skip(reason="needs torch (the 'oracle' extra)"))
