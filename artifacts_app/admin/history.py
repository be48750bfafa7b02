"""A record's history in the admin: its versions (pick any two to compare, download any), the diff
page, and pin/unpin. Reads go through ``selectors.versions`` (the diff REST serves), writes through
``services.artifact_pin``. Restore is an agent's act (API.md: agent keys only), so the admin shows
it as unavailable rather than offering it."""

from __future__ import annotations

import difflib
import json

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from artifacts_app import blobs, media, services
from artifacts_app.admin.display import EMPTY, cut, elide, iso, size, when
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Artifact
from artifacts_app.records import ArtifactRecord, media_type
from artifacts_app.selectors import versions

HISTORY_SHOWN = 50
RESTORE_UNAVAILABLE = (
    "Restore is an agent's act (API.md: POST …/versions/<n>/restore with the agent's key); "
    "the admin does not offer it."
)


def change_url(artifact_id: str) -> str:
    return reverse("admin:artifacts_app_artifact_change", args=[artifact_id])


def version_content_url(slug: str, artifact_id: str, number: int) -> str:
    return f"/{slug}/v1/artifacts/{artifact_id}/versions/{number}/content"


def history_table(obj: Artifact) -> SafeString:
    """The newest ``HISTORY_SHOWN`` versions with a pair of radios each (compare any two), a
    download per version, pin/unpin and restore (unavailable). The inputs belong to forms placed
    after the page's own (``form=`` attributes): the admin's change page is itself one form."""
    try:
        page = versions.versions_page(agent=obj.agent, artifact_id=obj.pk, limit=HISTORY_SHOWN)
    except NotFoundError:  # a record from before versions, never backfilled
        return format_html("<p>{}</p>", "No version of this record is kept.")
    records = page.records()
    newest = records[0].version
    older = records[1].version if len(records) > 1 else newest
    rows = format_html_join(
        "",
        "<tr><td>v{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        '<td class="c-radio"><input type="radio" form="history-compare" name="from" value="{}" aria-label="from v{}"{}></td>'
        '<td class="c-radio"><input type="radio" form="history-compare" name="to" value="{}" aria-label="to v{}"{}></td></tr>',
        (
            (
                r.version,
                when(r.updated_at),
                r.kind,
                elide(r.title, 60),
                elide(r.session_id, 16),
                r.source,
                _download(obj, r),
                r.version,
                r.version,
                mark_safe(" checked") if r.version == older else "",
                r.version,
                r.version,
                mark_safe(" checked") if r.version == newest else "",
            )
            for r in records
        ),
    )
    more = (
        format_html("<p>Only the newest {} versions are listed.</p>", HISTORY_SHOWN)
        if page.next_cursor
        else ""
    )
    pin_label = "Unpin" if obj.pinned else "Pin"
    return format_html(
        '<table class="artifact-history" id="versions"><caption class="visually-hidden">'
        'The record\'s versions</caption><colgroup><col class="c-v"><col class="c-when">'
        '<col class="c-kind"><col class="c-title"><col class="c-session"><col class="c-source">'
        '<col class="c-content"><col class="c-radio"><col class="c-radio"></colgroup>'
        "<thead><tr><th>version</th><th>tagged</th><th>kind</th>"
        "<th>title</th><th>session</th><th>source</th><th>content</th>"
        '<th class="c-radio">from</th><th class="c-radio">to</th>'
        "</tr></thead><tbody>{}</tbody></table>{}"
        '<p class="history-actions">'
        '<button type="submit" form="history-compare" class="button" id="history-compare-button"'
        "{}>Compare the two chosen versions</button> "
        '<label class="diff-view-choice">as <select form="history-compare" name="view" '
        'id="history-compare-view"><option value="split">side by side</option>'
        '<option value="unified">unified</option></select></label> '
        '<button type="submit" form="artifact-pin" name="pinned" value="{}" class="button" '
        'id="pin-button">{}</button> '
        '<button type="button" class="button" id="restore-button" disabled title="{}">'
        "Restore (unavailable here)</button></p>"
        '<p class="help">{}</p>',
        rows,
        more,
        mark_safe(" disabled") if len(records) < 2 else "",
        "0" if obj.pinned else "1",
        pin_label,
        RESTORE_UNAVAILABLE,
        RESTORE_UNAVAILABLE,
    )


def _download(obj: Artifact, record: ArtifactRecord) -> SafeString | str:
    if record.content is None:
        return EMPTY
    return format_html(
        '<a href="{}" download>v{}</a> ({}, {})',
        version_content_url(obj.agent.slug, obj.pk, record.version),
        record.version,
        size(record.content.size),
        cut(record.content.content_type, 24),
    )


def _value(value: JSON) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_view(
    model_admin: ModelAdmin[Artifact], request: HttpRequest, object_id: str
) -> HttpResponse:
    """Version ``to`` against version ``from`` (any two), as the REST diff answers it, written
    for a person: the fields that changed, the JSON Patch, and a line diff of the data."""
    obj = model_admin.get_object(request, object_id)
    if obj is None or not model_admin.has_view_permission(request, obj):
        return HttpResponseRedirect(reverse("admin:artifacts_app_artifact_changelist"))
    try:
        to = versions.check_number(request.GET.get("to", ""), field="to")
        from_ = versions.check_number(request.GET.get("from", ""), field="from")
        diff = versions.versions_diff(agent=obj.agent, artifact_id=obj.pk, number=to, from_=from_)
        old = versions.version_get(agent=obj.agent, artifact_id=obj.pk, number=from_)
        new = versions.version_get(agent=obj.agent, artifact_id=obj.pk, number=to)
    except ArtifactError as exc:
        messages.error(request, exc.message)
        return HttpResponseRedirect(change_url(obj.pk))
    view = "unified" if request.GET.get("view") == "unified" else "split"
    old_lines = json.dumps(old.data, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    new_lines = json.dumps(new.data, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    old_text, old_note = content_lines(old)
    new_text, new_note = content_lines(new)
    same_content = (old.content and old.content.sha256) == (new.content and new.content.sha256)
    if same_content:
        content_note = "The content is the same." if old.content else "Neither version has content."
    else:
        content_note = old_note or new_note
    content_diff = (
        line_diff(old_text, new_text, from_, to, view=view)
        if not same_content and old_text is not None and new_text is not None
        else None
    )
    here = reverse("admin:artifacts_app_artifact_diff", args=[obj.pk])
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": f"{obj.pk}: v{from_} → v{to}",
        "artifact": obj,
        "artifact_url": change_url(obj.pk),
        "from_version": from_,
        "to_version": to,
        "from_when": iso(old.updated_at),
        "to_when": iso(new.updated_at),
        "fields": [
            (name, _value(c["from"]), _value(c["to"])) for name, c in diff["fields"].items()
        ],
        "ops": [
            (
                op["op"],
                op.get("path") or "/",
                _value(op["value"]) if "value" in op else EMPTY,
                op.get("from", EMPTY),
            )
            for op in diff["data"]
        ],
        "view": view,
        "split_url": f"{here}?from={from_}&to={to}&view=split",
        "unified_url": f"{here}?from={from_}&to={to}&view=unified",
        "data_diff": line_diff(old_lines, new_lines, from_, to, view=view),
        "content_diff": content_diff,
        "content_note": content_note,
        "content_types": (_content_label(old), _content_label(new)),
    }
    return TemplateResponse(request, "admin/artifacts_app/artifact/diff.html", context)


CONTENT_DIFF_MAX = 1024 * 1024  # bytes of each version's content compared line by line
CONTEXT_LINES = 3


def _content_label(record: ArtifactRecord) -> str:
    if record.content is None:
        return "no content"
    return f"{media_type(record.content.content_type)}, {size(record.content.size)}"


def _texty(content_type: str) -> tuple[bool, bool]:
    """(compared line by line, pretty-printed as JSON first)."""
    essence = media_type(content_type)
    is_json = essence == "application/json" or essence.endswith("+json")
    return essence.startswith("text/") or is_json, is_json


def content_lines(record: ArtifactRecord) -> tuple[list[str] | None, str]:
    """A version's content as lines to compare (JSON pretty-printed), or None and the reason it
    is not compared: not text, or past ``CONTENT_DIFF_MAX``. No content: no lines."""
    content = record.content
    if content is None:
        return [], ""
    texty, is_json = _texty(content.content_type)
    if not texty:
        return None, (
            f"v{record.version}'s content is {media_type(content.content_type)}, not text: "
            "it is not compared line by line (download both from the versions table)."
        )
    if content.size > CONTENT_DIFF_MAX:
        return None, (
            f"v{record.version}'s content is {size(content.size)}, past the "
            f"{size(CONTENT_DIFF_MAX)} compared line by line: download both to compare them."
        )
    try:
        raw = blobs.blob_read(content.sha256, end=content.size - 1) if content.size else b""
    except (OSError, ArtifactError):
        return None, f"v{record.version}'s stored bytes did not answer; try again later."
    text = raw.decode(media.text_encoding(_charset(content.content_type)) or "utf-8", "replace")
    if is_json:
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
        except ValueError:
            pass  # not JSON after all: compared as it is
    return text.splitlines(), ""


def _charset(content_type: str) -> str | None:
    parsed = media.parse(content_type or "")
    return parsed.param("charset") if parsed else None


def line_diff(
    old: list[str], new: list[str], from_: int, to: int, *, view: str
) -> SafeString | None:
    """``old`` → ``new`` line by line (difflib): a unified diff, or side by side — unchanged runs
    folded to ``CONTEXT_LINES`` around each change. None when they are the same."""
    if old == new:
        return None
    if view == "unified":
        lines = list(
            difflib.unified_diff(old, new, f"v{from_}", f"v{to}", lineterm="", n=CONTEXT_LINES)
        )[2:]
        return format_html(
            '<pre class="diff-lines">{}</pre>',
            format_html_join(
                "", '<span class="{}">{}</span>\n', ((_line_class(line), line) for line in lines)
            ),
        )
    rows: list[tuple[str, str, str, str, str, str]] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        first = group[0]
        rows.append(("hunk", "", f"@@ -{first[1] + 1} +{first[3] + 1} @@", "hunk", "", ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                    rows.append(("same", str(i + 1), old[i], "same", str(j + 1), new[j]))
                continue
            left = list(range(i1, i2)) if tag in ("replace", "delete") else []
            right = list(range(j1, j2)) if tag in ("replace", "insert") else []
            for n in range(max(len(left), len(right))):
                rows.append(
                    _side(old, left[n] if n < len(left) else None, "removed")
                    + _side(new, right[n] if n < len(right) else None, "added")
                )
    body = format_html_join(
        "",
        '<tr><td class="n">{}</td><td class="{}">{}</td><td class="n">{}</td>'
        '<td class="{}">{}</td></tr>',
        ((ln, lc, lt, rn, rc, rt) for lc, ln, lt, rc, rn, rt in rows),
    )
    return format_html(
        '<table class="diff-side"><colgroup><col class="n"><col><col class="n"><col></colgroup>'
        '<thead><tr><th colspan="2">v{}</th><th colspan="2">v{}</th></tr></thead>'
        "<tbody>{}</tbody></table>",
        from_,
        to,
        body,
    )


def _side(lines: list[str], at: int | None, changed: str) -> tuple[str, str, str]:
    """One side of a changed row: (its class, its line number, its text); blank past its end."""
    if at is None:
        return ("blank", "", "")
    return (changed, str(at + 1), lines[at])


def _line_class(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    return {"+": "added", "-": "removed"}.get(line[:1], "same")


def pin_view(
    model_admin: ModelAdmin[Artifact], request: HttpRequest, object_id: str
) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    obj = model_admin.get_object(request, object_id)
    if obj is None or not model_admin.has_view_permission(request, obj):
        return HttpResponseRedirect(reverse("admin:artifacts_app_artifact_changelist"))
    pinned = request.POST.get("pinned") == "1"
    try:
        services.artifact_pin(agent=obj.agent, artifact_id=obj.pk, pinned=pinned)
    except ArtifactError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{'Pinned' if pinned else 'Unpinned'} {obj.pk}.")
    return HttpResponseRedirect(change_url(obj.pk))
