"""The one error type of memsnap's Python API."""

from __future__ import annotations

from typing import Dict, Optional


class SnapshotError(ValueError):
    """A snapshot that cannot be read: unreadable, truncated, hostile, or not a snapshot.

    The message is the command line's (``"FILE: what went wrong (at byte offset N)"``).
    Programs match ``code``, never the message: the code is stable across
    releases, the words are not.

    Attributes:
        code: what went wrong, a stable snake_case code: ``"not_a_pickle"``,
            ``"truncated"``, ``"refused_opcode"``, ``"limit_exceeded"``,
            ``"not_a_snapshot"``, ``"file_not_found"``, ... (every code and its
            meaning: ``memsnap.error_codes()``, docs/safety.md).
        path: the file (or ``"<bytes>"``, ``"<dict>"``) the error is about, if any.
        offset: the byte offset in the pickle where reading stopped, if known.
        kind: ``"input"`` (the file), ``"output"`` (a file memsnap writes), or
            ``"limit"`` (a limit of ``check`` was violated).

    An argument memsnap cannot use is a ``ValueError`` (not this class) whose
    ``code`` is ``"bad_parameter"`` (or ``"bad_config_file"``, ``"unavailable"``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: Optional[str] = None,
        offset: Optional[int] = None,
        kind: str = "input",
        code: str = "internal_error",
    ) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset
        self.kind = kind
        self.code = code


def usage_error(message: str, code: str = "bad_parameter") -> ValueError:
    """The ValueError of an argument memsnap cannot use, with its ``code`` as the core sets it."""
    error = ValueError(message)
    setattr(error, "code", code)  # noqa: B010 (ValueError declares no code)
    return error


def error_codes() -> Dict[str, str]:
    """Every error code memsnap raises (``SnapshotError.code``, ``ValueError.code``) and its
    meaning in one line, in the core's order; the same table as the command line's and the
    server's ``"code"``."""
    from . import _core

    return {code: meaning for code, _kind, meaning in _core.error_codes()}


class MemsnapWarning(UserWarning):
    """What the command line says on stderr beside a report (a device chosen, a value clamped)."""
