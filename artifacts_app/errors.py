"""One error type for every refusal (DESIGN.md §12).

Services raise these; each entry point maps them once: REST to the envelope and a status chosen by
the subclass, commands to ``CommandError``, the admin to a message, websockets to a close code.
"""

from __future__ import annotations

from pydantic import ValidationError

from artifacts_app.jsontypes import JSON, JSONObject


class ArtifactError(Exception):
    """A refusal: ``code`` is snake_case and stable, ``message`` a sentence a person can act on."""

    status = 400

    def __init__(self, code: str, message: str, details: JSON = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def as_envelope(self) -> JSONObject:
        error: JSONObject = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class NotFoundError(ArtifactError):
    """What the caller named does not exist, or it may not see it (the two look the same)."""

    status = 404


class ForbiddenError(ArtifactError):
    """The caller is known but may not do this."""

    status = 403


class ConflictError(ArtifactError):
    """The thing to create exists already."""

    status = 409


class TooLargeError(ArtifactError):
    """A size limit from settings was passed."""

    status = 413


class GoneError(ArtifactError):
    """What the caller named existed and is gone for good (an expired upload)."""

    status = 410


class PreconditionFailedError(ArtifactError):
    """The request speaks a version of a protocol the server does not (tus's ``Tus-Resumable``)."""

    status = 412


class UnsupportedMediaTypeError(ArtifactError):
    """The body's ``Content-Type`` is not the one the route takes."""

    status = 415


class LockedError(ArtifactError):
    """Another request is writing the same thing now (a resumable upload's other PATCH)."""

    status = 423


class ChecksumMismatchError(ArtifactError):
    """The body does not match the checksum it came with (tus ``checksum``: 460)."""

    status = 460


class StalledError(ArtifactError):
    """The client stopped sending what it began to send."""

    status = 408


class UnauthenticatedError(ArtifactError):
    """No credentials, or ones that are unknown or revoked."""

    status = 401


class TooManyAttemptsError(ArtifactError):
    """Too many failed authentications from one client address (``throttle``): 429 with
    ``Retry-After``, in place of the 401 the credential would have had."""

    status = 429

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            "too_many_attempts",
            "Too many failed authentications from this address; retry in "
            f"{retry_after} s (valid credentials are accepted meanwhile).",
        )
        self.retry_after = retry_after


class UnavailableError(ArtifactError):
    """A dependency (the database, the blob storage) failed or did not answer in time: the
    service, not the request, is at fault; the same request may succeed later (``Retry-After``)."""

    status = 503
    retry_after = 5  # seconds, a hint for clients and proxies


class StorageFullError(UnavailableError):
    """The storage has no room left (ENOSPC, a quota): 507 Insufficient Storage."""

    status = 507
    retry_after = 60


class SchemaInvalidError(ArtifactError):
    """``data`` does not match its kind's schema. Keeps pydantic's error, so that the tool can
    word the same refusal for the model without validating again."""

    def __init__(
        self,
        code: str,
        message: str,
        details: JSON = None,
        *,
        kind: str,
        validation: ValidationError | None,
    ) -> None:
        super().__init__(code, message, details)
        self.kind = kind
        self.validation = validation
