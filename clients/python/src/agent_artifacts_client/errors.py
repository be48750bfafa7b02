"""``ClientError``: every refusal or failure the client reports, carrying the API's error envelope."""

from __future__ import annotations

from typing import Any

import httpx


class ClientError(Exception):
    """A refusal or failure: ``code`` and ``message`` from the API's error envelope
    (``{"error": {"code", "message", "details"?}}``), the HTTP ``status`` and the ``details``.

    ``status`` is None when no answer came (``connection_error``).
    """

    def __init__(
        self, code: str, message: str, *, status: int | None = None, details: Any = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details

    def __repr__(self) -> str:
        return f"ClientError({self.code!r}, {self.message!r}, status={self.status})"


def from_response(response: httpx.Response) -> ClientError:
    """The envelope of a refused answer as a ``ClientError`` (a sentence of our own if the body
    is not an envelope: a proxy's HTML page, say)."""
    try:
        error = response.json()["error"]
        return ClientError(
            error["code"],
            error["message"],
            status=response.status_code,
            details=error.get("details"),
        )
    except (ValueError, KeyError, TypeError):
        text = response.text[:200]
        return ClientError(
            f"http_{response.status_code}",
            f"The server answered {response.status_code} {response.reason_phrase}. {text}".strip(),
            status=response.status_code,
        )


def connection_error(exc: Exception, attempts: int, retried: bool) -> ClientError:
    why = "retried" if retried else "not retried: repeating it could tag twice"
    return ClientError(
        "connection_error",
        f"No answer from the server after {attempts} attempt(s) ({type(exc).__name__}: {exc}); {why}.",
    )
