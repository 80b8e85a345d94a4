"""The one error type of memsnap's Python API."""

from __future__ import annotations

from typing import Optional


class SnapshotError(ValueError):
    """A snapshot that cannot be read: unreadable, truncated, hostile, or not a snapshot.

    The message is the command line's (``"FILE: what went wrong (at byte offset N)"``).

    Attributes:
        path: the file (or ``"<bytes>"``, ``"<dict>"``) the error is about, if any.
        offset: the byte offset in the pickle where reading stopped, if known.
        kind: ``"input"`` (the file), ``"output"`` (a file memsnap writes), or
            ``"limit"`` (a limit of ``check`` was violated).
    """

    def __init__(
        self,
        message: str,
        *,
        path: Optional[str] = None,
        offset: Optional[int] = None,
        kind: str = "input",
    ) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset
        self.kind = kind


class MemsnapWarning(UserWarning):
    """What the command line says on stderr beside a report (a device chosen, a value clamped)."""
