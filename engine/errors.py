"""Domain errors of the engine; the gRPC layer maps each to the status code the SDK expects."""

from __future__ import annotations

from google.protobuf.message import Message


class EngineError(Exception):
    """An error with a message a person can act on, plus optional Temporal error details."""

    code = "INTERNAL"

    def __init__(self, message: str, details: Message | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidArgument(EngineError):
    code = "INVALID_ARGUMENT"


class NotFound(EngineError):
    code = "NOT_FOUND"


class AlreadyExists(EngineError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(EngineError):
    code = "FAILED_PRECONDITION"


class ResourceExhausted(EngineError):
    code = "RESOURCE_EXHAUSTED"


class PermissionDenied(EngineError):
    code = "PERMISSION_DENIED"


class Unauthenticated(EngineError):
    code = "UNAUTHENTICATED"


class DeadlineExceeded(EngineError):
    code = "DEADLINE_EXCEEDED"


class Unimplemented(EngineError):
    """A feature Perdura does not offer (yet); the message says which."""

    code = "UNIMPLEMENTED"


class Unavailable(EngineError):
    """A transient condition (e.g. a lost race on a run's version); the SDK retries it."""

    code = "UNAVAILABLE"
