"""Twisted's HTTP/1.1 channel (``twisted.web.http``), where its public interface has no door.

Written for Twisted 26.10.0; ``tests/adapters/test_twisted_pin.py`` holds it there. The one private
name touched:

- ``HTTPChannel._respondToBadRequestAndDisconnect()``: what the channel calls for every request it
  cannot parse (a malformed request line or header, a bad ``Content-Length``, broken chunked
  framing). It writes a bare ``400 Bad Request`` and closes the connection; there is no public hook
  to answer otherwise. ``Channel`` overrides it to call ``malformed()``, which the site overrides
  (the API's error envelope, a half-close).

Everything else the site asks of Twisted goes through public doors: ``Request(…,
parsePOSTFormSubmission=False)`` (no form parsing), ``ITransport.pauseProducing``/``resumeProducing``
(reading a request body with flow control), ``IConsumer.registerProducer`` on the request (pacing a
streamed response by the send buffer), ``HTTPFactory.protocol`` (the channel class).
"""

from __future__ import annotations

from twisted.web import http


class Channel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel with a public hook for a request it cannot parse."""

    def _respondToBadRequestAndDisconnect(self) -> None:
        self.malformed()

    def malformed(self) -> None:
        """A request the parser refuses; by default Twisted's bare 400 and a closed connection."""
        super()._respondToBadRequestAndDisconnect()
