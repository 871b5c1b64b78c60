"""Error classes mirroring `tf.errors`; every runtime failure is an OpError."""
from __future__ import annotations


class OpError(Exception):
    """A failure while running a graph (tf.errors.OpError).

    `node_def`/`op` name the operation at fault where one is known; `message` says what and why.
    """

    error_code = 2

    def __init__(self, node_def=None, op=None, message: str = ""):
        # Allow OpError("message") for convenience, besides TF's (node_def, op, message).
        if message == "" and op is None and isinstance(node_def, str):
            message, node_def = node_def, None
        super().__init__(message)
        self.message = message
        self.node_def = node_def
        self.op = op

    def __str__(self):
        return self.message

    def __reduce__(self):
        return type(self), (self.node_def, None, self.message)


class CancelledError(OpError):
    error_code = 1


class UnknownError(OpError):
    error_code = 2


class InvalidArgumentError(OpError):
    error_code = 3


class DeadlineExceededError(OpError):
    error_code = 4


class NotFoundError(OpError):
    error_code = 5


class AlreadyExistsError(OpError):
    error_code = 6


class PermissionDeniedError(OpError):
    error_code = 7


class ResourceExhaustedError(OpError):
    error_code = 8


class FailedPreconditionError(OpError):
    error_code = 9


class AbortedError(OpError):
    error_code = 10


class OutOfRangeError(OpError):
    error_code = 11


class UnimplementedError(OpError):
    error_code = 12


class InternalError(OpError):
    error_code = 13


class UnavailableError(OpError):
    error_code = 14


class DataLossError(OpError):
    error_code = 15


class UnauthenticatedError(OpError):
    error_code = 16


_BY_CODE = {c.error_code: c for c in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
    AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError,
    AbortedError, OutOfRangeError, UnimplementedError, InternalError, UnavailableError, DataLossError,
    UnauthenticatedError)}

# TF's error codes (tf.errors.OK ... tf.errors.UNAUTHENTICATED).
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS = 0, 1, 2, 3, 4, 5, 6
PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE = 7, 8, 9, 10, 11
UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED = 12, 13, 14, 15, 16


def exception_type_from_error_code(error_code: int):
    """The OpError subclass of a TF error code (tf.errors.exception_type_from_error_code)."""
    try:
        return _BY_CODE[error_code]
    except KeyError:
        raise KeyError(f"error_code {error_code} has no exception type (OK is 0)") from None


def error_code_from_exception_type(cls) -> int:
    """The TF error code of an OpError subclass (tf.errors.error_code_from_exception_type)."""
    if not (isinstance(cls, type) and issubclass(cls, OpError)):
        raise KeyError(f"{cls!r} is not an OpError type")
    return cls.error_code


def from_code(code: int, message: str, op_name: str | None = None) -> OpError:
    """Rebuilds an error of the class for `code` (used when errors cross processes)."""
    return _BY_CODE.get(code, UnknownError)(op_name, None, message)


class Status:
    """A TF_Status-like record of one operation's outcome: `code` (OK when nothing went wrong) and
    `message`; `set(code, message)` records a failure."""

    __slots__ = ("code", "message")

    def __init__(self):
        self.code = OK
        self.message = ""

    def set(self, code: int, message: str) -> None:
        if code != OK and code not in _BY_CODE:
            raise ValueError(f"unknown error code {code}")
        self.code, self.message = code, message

    def ok(self) -> bool:
        return self.code == OK


class raise_exception_on_not_ok_status:  # noqa: N801 (TF's name)
    """A context manager yielding a Status; if the block leaves it not OK, the OpError of its code
    is raised on exit (tf.errors.raise_exception_on_not_ok_status). TF's yields a C TF_Status for
    calls into its C API; actorflow has no C API, so the block sets the Status itself."""

    def __enter__(self) -> Status:
        self.status = Status()
        return self.status

    def __exit__(self, exc_type, exc, tb):
        status, self.status = self.status, None
        if status.code != OK:
            raise from_code(status.code, status.message)
        return False
