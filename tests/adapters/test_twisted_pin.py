"""The Twisted adapter (``agent_site/adapters/twisted.py``) pinned to the release it was written
for, and the public doors the site takes instead of private names, checked on that release.

A Twisted release that renames or reshapes what the adapter overrides must fail here, loudly:
otherwise the parser's refusals would go back to a bare 400 without the API's envelope, silently.
"""

from __future__ import annotations

import inspect

import twisted
from twisted.web import http

from agent_site.adapters import twisted as adapter

WRITTEN_FOR = "26.10.0"


def test_twisted_is_the_release_the_adapter_was_written_for():
    assert twisted.__version__ == WRITTEN_FOR, (
        f"agent_site/adapters/twisted.py was written for Twisted {WRITTEN_FOR}, this is "
        f"{twisted.__version__}: check the private names listed at the top of that module (and "
        "the public doors of agent_site/server.py's docstring) against this release, mend the "
        "adapter, then move WRITTEN_FOR"
    )


def test_the_channel_refuses_a_malformed_request_through_the_overridden_name():
    # The name exists, takes nothing, and is what the parser calls on a bad request line, a bad
    # header, a bad Content-Length and broken chunked framing.
    method = http.HTTPChannel._respondToBadRequestAndDisconnect
    assert list(inspect.signature(method).parameters) == ["self"]
    source = inspect.getsource(http.HTTPChannel)
    assert source.count("self._respondToBadRequestAndDisconnect()") >= 4
    assert adapter.Channel._respondToBadRequestAndDisconnect is not method


def test_a_malformed_request_reaches_the_hook():
    called = []

    class Probe(adapter.Channel):
        def malformed(self) -> None:
            called.append(True)

    from twisted.internet.testing import StringTransport

    channel = Probe()
    channel.makeConnection(StringTransport())
    channel.dataReceived(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n")
    assert called == [True]


def test_form_parsing_is_off_through_the_request_constructor():
    """The public door for form parsing: ``Request(…, parsePOSTFormSubmission=False)``."""
    from twisted.web.test.requesthelper import DummyChannel

    assert "parsePOSTFormSubmission" in inspect.signature(http.Request.__init__).parameters
    body = b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--b--\r\n'
    parsed = {}
    for parse in (True, False):
        request = http.Request(DummyChannel(), parsePOSTFormSubmission=parse)
        request.requestHeaders.setRawHeaders(b"content-type", [b"multipart/form-data; boundary=b"])
        request.gotLength(len(body))
        request.handleContentChunk(body)
        request.requestReceived(b"POST", b"/", b"HTTP/1.1")
        parsed[parse] = dict(request.args)
    assert parsed == {True: {b"a": [b"1"]}, False: {}}


def test_a_request_producer_is_paused_when_the_send_buffer_fills():
    """The public door for pacing a response: a push producer registered with the request is
    paused past the transport's buffer and resumed once the buffer is sent."""
    from twisted.internet.abstract import FileDescriptor

    assert FileDescriptor.bufferSize == 2**16
    source = inspect.getsource(http.HTTPChannel.pauseProducing)
    assert "self._requestProducer.pauseProducing()" in source
    assert "self._requestProducer.resumeProducing()" in inspect.getsource(
        http.HTTPChannel.resumeProducing
    )
