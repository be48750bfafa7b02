"""Lists that read at a glance: ids in URLs are the ids, times ISO UTC to the
second, one sign for empty values, and a date drill-down that offers only dates holding records."""

from __future__ import annotations

import datetime
import re

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from artifacts_app import services
from artifacts_app.admin.display import EMPTY, cut, iso, when
from artifacts_app.models import Artifact

pytestmark = pytest.mark.django_db

LIST = reverse("admin:artifacts_app_artifact_changelist")


def quoted_looking_record(reviewer):
    """A record whose id holds "_25"/"_22"/"_26", which Django's unquote would turn into another id."""
    key = next(
        f"k{n}"
        for n in range(10_000)
        if services.keyed_id("reviewer", f"k{n}")[4:6] in {"22", "25", "26"}
    )
    return services.artifact_tag(agent=reviewer, kind="report", key=key, title="Odd id", data={})


def test_list_links_carry_the_id_itself_and_both_forms_open(staff_client, reviewer):
    record = quoted_looking_record(reviewer).record
    body = staff_client.get(LIST + "?agent=reviewer").content.decode()
    raw = f"/admin/artifacts_app/artifact/{record.id}/change/"
    assert f'href="{raw}' in body and "_5F" not in body
    for url in (raw, f"/admin/artifacts_app/artifact/{quote(record.id)}/change/"):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert f'<div class="readonly">{record.id}</div>' in response.content.decode()
    delete = staff_client.get(f"/admin/artifacts_app/artifact/{record.id}/delete/")
    assert delete.status_code == 200 and record.id in delete.content.decode()


def test_an_unknown_id_redirects_with_a_message(staff_client, reviewer):
    response = staff_client.get("/admin/artifacts_app/artifact/art_nope/change/", follow=True)
    assert response.redirect_chain and "doesn’t exist" in response.content.decode()


def test_times_are_iso_utc_to_the_second(staff_client, reviewer):
    record = services.artifact_tag(agent=reviewer, kind="report", data={}).record
    body = staff_client.get(LIST + "?agent=reviewer").content.decode()
    shown = re.search(r'<time datetime="([^"]+)" title="[^"]+">([^<]+)T<wbr>([^<]+)</time>', body)
    assert shown, body
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", shown.group(1))
    assert f"{shown.group(2)}T{shown.group(3)}" == iso(record.updated_at)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", shown.group(2))
    assert re.fullmatch(r"\d\d:\d\d:\d\dZ", shown.group(3))
    page = staff_client.get(
        reverse("admin:artifacts_app_artifact_change", args=[record.id])
    ).content.decode()
    assert "a.m." not in page and "p.m." not in page
    for url in (
        reverse("admin:artifacts_app_agent_changelist"),
        reverse("admin:artifacts_app_apikey_changelist"),
    ):
        assert "a.m." not in staff_client.get(url).content.decode(), url


def test_display_helpers():
    moment = datetime.datetime(2026, 12, 1, 18, 58, 3, 456789, tzinfo=datetime.UTC)
    assert iso(moment) == "2026-12-01T18:58:03Z"
    assert (
        iso(None) == EMPTY and when(None) == EMPTY and cut(None, 5) == EMPTY and cut("", 5) == EMPTY
    )
    assert 'title="2026-12-01T18:58:03.456Z"' in str(when(moment))
    assert str(cut("abcdef", 4)) == '<span title="abcdef">abc…</span>'
    assert str(cut("<b>", 4)) == '<span title="&lt;b&gt;">&lt;b&gt;</span>'


def test_one_sign_for_empty_values(staff_client, reviewer):
    services.artifact_tag(agent=reviewer, kind="report", data={})  # no key, session, content
    body = staff_client.get(LIST + "?agent=reviewer").content.decode()
    cells = re.findall(r'<td class="field-(?:session_sid|type_size)">([^<]*)</td>', body)
    assert cells and set(cells) == {EMPTY}
    assert ">-<" not in body


def test_date_drill_down_offers_only_dates_that_hold_records(staff_client, reviewer):
    this = services.artifact_tag(agent=reviewer, kind="report", key="now", data={}).record
    old = services.artifact_tag(agent=reviewer, kind="report", key="old", data={}).record
    then = datetime.datetime(this.updated_at.year - 2, 3, 14, 9, 0, tzinfo=datetime.UTC)
    Artifact.objects.filter(pk=old.id).update(updated_at=then)

    def links(query: str) -> list[str]:
        body = staff_client.get(LIST + "?agent=reviewer" + query).content.decode()
        nav = re.search(r'<nav class="toplinks">(.*?)</nav>', body, re.S)
        assert nav, query
        return [t.strip() for t in re.findall(r"<a [^>]*>([^<]*)</a>", nav.group(1))]

    years = links("")
    assert years == [str(this.updated_at.year), str(then.year)]  # not the year between
    assert links(f"&updated_at__year={then.year}") == ["&lsaquo; All dates", "Mar"]
    assert links(f"&updated_at__year={then.year}&updated_at__month=3") == [
        f"&lsaquo; {then.year}",
        "14",
    ]
    day = links(f"&updated_at__year={then.year}&updated_at__month=3&updated_at__day=14")
    assert day == ["&lsaquo; March " + str(then.year)]
    body = staff_client.get(
        LIST
        + f"?agent=reviewer&updated_at__year={then.year}&updated_at__month=3&updated_at__day=14"
    ).content.decode()
    assert "old" in body and ">now<" not in body


@pytest.mark.parametrize(
    "query",
    [
        "&updated_at__year=abc",
        "&updated_at__year=2026&updated_at__month=13",
        "&updated_at__year=99999",
    ],
)
def test_date_drill_down_with_a_bad_date_answers(staff_client, reviewer, query):
    services.artifact_tag(agent=reviewer, kind="report", data={})
    response = staff_client.get(LIST + "?agent=reviewer" + query)
    assert response.status_code in (200, 302)
