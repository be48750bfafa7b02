"""The one preview renderer (artifacts_app/previews.py): the decision by parsed type and size,
and what each kind's HTML may and may not contain. The browser half is tests/browser/test_admin_previews.py."""

from __future__ import annotations

import pytest

from artifacts_app import previews, services

URL = "/reviewer/v1/artifacts/art_x/content"


def shown(content_type: str | None, body: bytes) -> previews.Preview:
    return previews.render(
        content_type=content_type,
        size=len(body),
        url=URL,
        read=lambda n: body[:n],
        filename="f.bin",
    )


@pytest.mark.parametrize(
    ("content_type", "size", "kind"),
    [
        ("text/markdown", 10, "markdown"),
        ("text/markdown; charset=utf-8", 10, "markdown"),
        ("TEXT/MARKDOWN", 10, "markdown"),
        ("text/markdown", previews.MARKDOWN_MAX + 1, "text"),
        ("image/png", 10, "image"),
        ("image/webp", 10, "image"),
        ("image/png", previews.IMAGE_MAX + 1, "download"),
        ("application/pdf", 10, "pdf"),
        ("application/json", 10, "json"),
        ("application/vnd.api+json", 10, "json"),
        ("application/json", previews.JSON_MAX + 1, "text"),
        ("text/plain", 10, "text"),
        ("text/csv", 10, "text"),
        ("application/xml", 10, "text"),
        ("application/yaml", 10, "text"),
        ("text/html", 10, "download"),
        ("text/html; charset=utf-8", 10, "download"),
        ("application/xhtml+xml", 10, "download"),
        ("image/svg+xml", 10, "download"),
        ("text/x-server-parsed-html", 10, "download"),
        ("application/octet-stream", 10, "download"),
        ("application/zip", 10, "download"),
        ("text/plain;,text/html", 10, "download"),  # not exactly one type
        ("", 10, "download"),
        (None, 10, "download"),
    ],
)
def test_kind_is_decided_by_the_parsed_type_and_size(content_type, size, kind):
    assert previews.preview_kind(content_type, size) == kind


def test_markdown_is_rendered_and_sanitized():
    body = (
        b"# Weekly report\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        b"<script>document.title='pwned'</script>\n\n"
        b'<img src=x onerror="alert(1)">\n\n'
        b"[ok](https://example.com) [bad](javascript:alert(1)) ![pic](https://tracker.example/p.png)\n"
    )
    preview = shown("text/markdown", body)
    html = str(preview.html)
    assert preview.kind == "markdown"
    assert "<h1>Weekly report</h1>" in html
    assert "<table>" in html and "<td>1</td>" in html
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=" in html  # raw HTML is text
    assert 'href="https://example.com"' in html and "noopener" in html
    assert 'href="javascript' not in html
    assert "[image: pic]" in html  # an image becomes a link: nothing fetched by the page


def test_image_and_pdf_point_at_the_content_route():
    image = str(shown("image/png", b"\x89PNG").html)
    assert f'<img class="preview-image" src="{URL}"' in image
    pdf = str(shown("application/pdf", b"%PDF-1.4").html)
    assert f'<iframe class="preview-pdf" sandbox src="{URL}"' in pdf


def test_json_is_pretty_foldable_and_escaped():
    body = b'{"verdict": "<b>approve</b>", "lines": [1, 2, 3], "ok": true, "none": null}'
    preview = shown("application/json", body)
    html = str(preview.html)
    assert preview.kind == "json"
    assert html.count("<details") == 2  # the object and the array
    assert "&quot;&lt;b&gt;approve&lt;/b&gt;&quot;" in html and "<b>" not in html
    assert '<span class="json-bool">true</span>' in html
    assert '<span class="json-null">null</span>' in html


def test_json_that_does_not_parse_or_is_too_large_is_text():
    assert shown("application/json", b"{nope").kind == "text"
    many = ("[" + ",".join(["1"] * (previews.JSON_NODES + 1)) + "]").encode()
    preview = shown("application/json", many)
    assert preview.kind == "text" and '<pre class="preview-text">' in str(preview.html)


def test_long_text_is_capped_with_show_all():
    body = ("line\n" * 5000).encode()
    html = str(shown("text/plain", body).html)
    assert '<details class="preview-more"><summary>Show all (' in html
    head = html.split('<pre class="preview-text">', 1)[1].split("</pre>", 1)[0]
    assert len(head) == previews.TEXT_SHOWN
    short = str(shown("text/plain", b"short").html)
    assert "Show all" not in short


def test_text_past_the_read_cap_says_so():
    body = b"x" * (previews.TEXT_MAX + 10)
    html = str(shown("text/plain", body).html)
    assert "download for the whole" in html


def test_html_svg_and_unknown_are_only_a_download():
    hostile = b"<script>alert(1)</script><svg onload=alert(1)>"
    for content_type in ("text/html", "image/svg+xml", "application/x-unknown"):
        preview = shown(content_type, hostile)
        html = str(preview.html)
        assert preview.kind == "download", content_type
        assert "<script" not in html and "<svg" not in html and "&lt;script" not in html
        assert f'<a href="{URL}" download="f.bin">Download</a>' in html


def test_text_that_is_bytes_is_a_download():
    assert shown("text/plain", b"\x00\x01\x02binary").kind == "download"


def test_charset_is_honoured():
    html = str(shown("text/plain; charset=latin-1", "café".encode("latin-1")).html)
    assert "café" in html


def test_missing_bytes_are_a_sentence(reviewer):
    record = services.artifact_tag(
        agent=reviewer, kind="report", data={}, contents="hello", content_type="text/plain"
    ).record
    assert record.content is not None
    ok = previews.preview_blob(
        sha256=record.content.sha256, size=5, content_type="text/plain", url=URL
    )
    assert ok.kind == "text" and "hello" in str(ok.html)
    missing = previews.preview_blob(sha256="0" * 64, size=5, content_type="text/plain", url=URL)
    assert missing.kind == "download" and "missing" in str(missing.html)


def test_empty_content():
    assert shown("text/plain", b"").kind == "text"
