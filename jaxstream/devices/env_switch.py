"""An environment variable that switches a check on every op, read as it is now, cheaply.

Note [Reading a switch on every op]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The stream sanitizer's switch (`JAXSTREAM_STREAM_CHECK`) is read where each op is
launched, so that a program (or a test) that changes it takes effect at the next op.
`os.environ.get` encodes the name and decodes the value on every call, which costs as
long as a whole kernel on a small tensor. `os.environ` keeps its variables in a table
of encoded names and values (`_data`), which every change through it updates, so the
switch looks its name up there, encoded once, and compares the value with encodings
made once too: the same answer as `os.environ.get`, for a dictionary lookup. Where
`os.environ` has no such table (an interpreter other than CPython), it asks
`os.environ.get`.
"""

from __future__ import annotations

import os


class EnvSwitch:
    """Variable `name`, compared with "0" or "1" as it is at each call."""

    __slots__ = ("name", "_get", "_key", "_zero", "_one")

    def __init__(self, name: str) -> None:
        self.name = name
        environ = os.environ
        table = getattr(environ, "_data", None)
        if isinstance(table, dict) and hasattr(environ, "encodekey"):
            self._get, self._key = table.get, environ.encodekey(name)
            self._zero, self._one = environ.encodevalue("0"), environ.encodevalue("1")
        else:
            self._get, self._key = environ.get, name
            self._zero, self._one = "0", "1"

    def is_one(self) -> bool:
        """Whether the variable is set to "1"."""
        return self._get(self._key) == self._one

    def is_not_zero(self) -> bool:
        """Whether the variable is unset, or set to anything but "0"."""
        return self._get(self._key) != self._zero
