"""Neural-net functions: softmax, log_softmax, logsumexp, the losses, one_hot, dropout."""

from __future__ import annotations

from typing import Any

METHODS: dict[str, Any] = {}
