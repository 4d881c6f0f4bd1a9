"""Progress bars that degrade to silence when tqdm is not installed."""

from __future__ import annotations

from typing import Any, Protocol


class ProgressBar(Protocol):
    def update(self, n: int = 1) -> Any: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> Any: ...

    def close(self) -> Any: ...


class _SilentBar:
    """Stands in for a tqdm bar, so experiments never test for tqdm themselves."""

    def update(self, n: int = 1) -> None:
        del n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        del s, refresh

    def close(self) -> None:
        pass


def progress_bar(
    total: int, desc: str, *, enabled: bool = True, leave: bool = False
) -> ProgressBar:
    """A tqdm bar on stderr, or a silent one if tqdm is missing or bars are off."""
    if not enabled:
        return _SilentBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _SilentBar()
    return tqdm(total=total, desc=desc, leave=leave, dynamic_ncols=True)
