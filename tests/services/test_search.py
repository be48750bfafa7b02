"""Search (API.md "Search"): q and where over one agent's list, the index written with the tag,
and refusals. The same suite runs on SQLite and, in the scale profile, on PostgreSQL."""

from __future__ import annotations

import pytest

from artifacts_app import search, selectors, services
from artifacts_app.errors import ArtifactError
from artifacts_app.services import _index


def keys(**query) -> list[str | None]:
    page = selectors.artifacts_page(**query)
    return [row["key"] for row in page.rows]


def found(agent, **query) -> set[str | None]:
    return {record.key for record in selectors.artifacts_all(agent=agent, **query)}


def tag(agent, key, data=None, **extra):
    return services.artifact_tag(agent=agent, kind="note", key=key, data=data or {}, **extra)


@pytest.fixture
def notes(freeform):
    tag(freeform, "a", {"text": "The quick brown Fox", "n": 5, "tags": ["x", "y"]}, title="Alpha")
    tag(freeform, "b", {"text": "quick thinking", "n": 12.5, "who": {"name": "Zoë"}})
    tag(freeform, "c", {"text": "brown bread", "n": "5", "flag": True, "none": None})
    tag(freeform, "d", {"n": 7, "tags": ["y"]}, title="Über Café 42")
    return freeform


# --- q -----------------------------------------------------------------------------------------


def test_every_word_must_match_case_insensitively(notes):
    assert found(notes, q="QUICK") == {"a", "b"}
    assert found(notes, q="quick brown") == {"a"}
    assert found(notes, q="brown") == {"a", "c"}


def test_the_last_word_matches_as_a_prefix_and_only_the_last(notes):
    assert found(notes, q="thin") == {"b"}
    assert found(notes, q="thin quick") == set()
    assert found(notes, q="quick thin") == {"b"}


def test_title_key_kind_and_nested_strings_are_searched_numbers_are_not(notes):
    assert found(notes, q="alpha") == {"a"}
    assert found(notes, q="zoë") == {"b"}
    assert found(notes, q="note") == {"a", "b", "c", "d"}
    assert found(notes, q="y") == {"a", "d"}  # strings inside arrays
    assert found(notes, q="5") == {"c"}  # the string "5", not the number 5


def test_words_are_letters_and_digits_without_stemming_or_folding_accents(notes):
    assert found(notes, q="über café 42") == {"d"}
    assert found(notes, q="uber") == set()
    assert found(notes, q="breads") == set()
    assert found(notes, q="zoe") == set()


def test_phrases_and_exclusions(notes):
    assert found(notes, q='"quick brown"') == {"a"}
    assert found(notes, q='"brown quick"') == set()
    assert found(notes, q="brown -fox") == {"c"}
    assert found(notes, q='quick -"brown fox"') == {"b"}
    assert found(notes, q="-quick") == {"c", "d"}


def test_operator_characters_are_only_separators(notes):
    assert found(notes, q="quick*") == {"a", "b"}
    for q in ("brown AND NEAR(fox", "fox^ : ( ) \\", "'fox'", 'brown OR"'):
        assert found(notes, q=q) <= {"a", "b", "c", "d"}
    assert found(notes, q="brown OR fox") == set()  # OR is a word like any other
    assert found(notes, q="(fox) brown:") == {"a"}


def test_content_text_is_searched_for_text_and_json_types(freeform):
    tag(freeform, "md", contents="# Heading\nsome marmalade", content_type="text/markdown")
    tag(freeform, "js", contents=b'{"fruit": "quince"}', content_type="application/json")
    tag(freeform, "bin", contents=b"marmalade quince", content_type="application/octet-stream")
    assert found(freeform, q="marmalade") == {"md"}
    assert found(freeform, q="quince") == {"js"}


def test_only_the_first_content_bytes_are_searched(freeform, settings):
    settings.ARTIFACTS_SEARCH_CONTENT_BYTES = 16
    tag(freeform, "long", contents="early words then late words", content_type="text/plain")
    assert found(freeform, q="early") == {"long"}
    assert found(freeform, q="late") == set()


def test_a_kept_content_stays_searched_without_its_bytes(freeform):
    tag(freeform, "k", {"v": 1}, contents="persimmon", content_type="text/plain")
    tag(freeform, "k", {"v": 2})  # no contents: the content is kept
    assert found(freeform, q="persimmon") == {"k"}
    tag(freeform, "k", {"v": 3}, contents="plum", content_type="text/plain")
    assert found(freeform, q="persimmon") == set()
    assert found(freeform, q="plum") == {"k"}


def test_a_record_is_found_as_soon_as_tagged_and_never_once_gone(freeform):
    tag(freeform, "one", {"w": "apricot"})
    assert found(freeform, q="apricot") == {"one"}
    tag(freeform, "one", {"w": "damson"})
    assert found(freeform, q="apricot") == set()
    assert found(freeform, q="damson") == {"one"}
    record = selectors.artifacts_page(agent=freeform, key="one").rows[0]
    services.artifact_delete(agent=freeform, artifact_id=record["id"])
    assert found(freeform, q="damson") == set()
    assert found(freeform, q="-zzz") == set()


def test_evicted_and_pruned_records_are_not_found(db):
    small = services.agent_create(slug="small", max_artifacts=2)
    for i in range(3):
        tag(small, f"k{i}", {"w": "greengage"})
    assert found(small, q="greengage") == {"k1", "k2"}
    services.artifacts_prune(agent="small", keep=1)
    assert found(small, q="greengage") == {"k2"}


def test_a_record_moved_out_of_a_users_sessions_is_not_found_by_them(freeform, alice, bob):
    mine = services.session_create(agent=freeform, sid="mine", owner="alice").sid
    theirs = services.session_create(agent=freeform, sid="theirs", owner="bob").sid
    tag(freeform, "m", {"w": "loquat"}, session_id=mine)
    from artifacts_app import access

    visible = access.visible(access.caller_from_user(alice), freeform)
    assert found(freeform, q="loquat", visible=visible) == {"m"}
    tag(freeform, "m", {"w": "loquat"}, session_id=theirs)
    assert found(freeform, q="loquat", visible=visible) == set()


def test_versions_are_not_searched(freeform):
    tag(freeform, "v", {"w": "medlar"})
    tag(freeform, "v", {"w": "sloe"})
    assert found(freeform, q="medlar") == set()


def test_search_combines_with_filters_and_keeps_pages_and_order(freeform):
    for i in range(7):
        tag(freeform, f"p{i}", {"w": "fig", "i": i})
    services.artifact_tag(agent=freeform, kind="other", key="o", data={"w": "fig"})
    first = selectors.artifacts_page(agent=freeform, q="fig", kind="note", limit=3)
    assert [row["key"] for row in first.rows] == ["p6", "p5", "p4"]
    second = selectors.artifacts_page(
        agent=freeform, q="fig", kind="note", limit=3, cursor=first.next_cursor
    )
    assert [row["key"] for row in second.rows] == ["p3", "p2", "p1"]
    assert keys(agent=freeform, q="fig", where={"i": {"$gte": 5}}) == ["p6", "p5"]
    assert keys(agent=freeform, q="fig", key="p2") == ["p2"]


# --- where -------------------------------------------------------------------------------------


def test_where_equality_and_types_never_mix(notes):
    assert found(notes, where={"n": 5}) == {"a"}
    assert found(notes, where={"n": "5"}) == {"c"}
    assert found(notes, where={"n": 5.0}) == {"a"}
    assert found(notes, where={"flag": True}) == {"c"}
    assert found(notes, where={"none": None}) == {"c"}
    assert found(notes, where={"who.name": "Zoë"}) == {"b"}
    assert found(notes, where='{"who.name": "zoë"}') == set()


def test_where_comparisons_numbers_with_numbers_strings_in_code_point_order(notes):
    assert found(notes, where={"n": {"$gt": 5}}) == {"b", "d"}
    assert found(notes, where={"n": {"$gte": 5, "$lt": 12.5}}) == {"a", "d"}
    assert found(notes, where={"n": {"$lte": "5"}}) == {"c"}
    assert found(notes, where={"text": {"$gt": "brown"}}) == {"b", "c"}  # "T" < "b"
    assert found(notes, where={"text": {"$lt": "a"}}) == {"a"}  # "T" < "a" by code point


def test_where_set_operators(notes):
    assert found(notes, where={"n": {"$in": [5, 7, "nope"]}}) == {"a", "d"}
    assert found(notes, where={"n": {"$nin": [5, 7]}}) == {"b"}
    assert found(notes, where={"n": {"$ne": 5}}) == {"b", "d"}
    assert found(notes, where={"flag": {"$exists": True}}) == {"c"}
    assert found(notes, where={"tags": {"$exists": False}}) == {"b", "c"}
    assert found(notes, where={"tags": {"$contains": "y"}}) == {"a", "d"}
    assert found(notes, where={"tags": {"$contains": "x"}}) == {"a"}
    assert found(notes, where={"text": {"$contains": "quick"}}) == set()


def test_where_and_or(notes):
    where = {"$or": [{"n": {"$gt": 10}}, {"tags": {"$contains": "x"}}], "text": {"$exists": True}}
    assert found(notes, where=where) == {"a", "b"}
    assert found(notes, where={"$and": [{"n": {"$gt": 1}}, {"n": {"$lt": 6}}]}) == {"a"}


def test_a_missing_path_or_a_path_through_a_scalar_never_matches(notes):
    assert found(notes, where={"text.deeper": "x"}) == set()
    assert found(notes, where={"nothing": {"$ne": 1}}) == set()


# --- refusals ----------------------------------------------------------------------------------


BAD_Q = [
    "x" * 513,
    " ".join(["w"] * 33),
    "* : ^ ( )",
    '""',
    "-",
    "a\x00b",
    "a\ud800b",
    "w" * 201,
]


@pytest.mark.parametrize("q", BAD_Q)
def test_bad_q_is_invalid_query(freeform, q):
    with pytest.raises(ArtifactError) as caught:
        selectors.artifacts_page(agent=freeform, q=q)
    assert caught.value.code == "invalid_query"
    assert caught.value.details["field"] == "q"


BAD_WHERE = [
    ("[1]", "$"),
    ('"x"', "$"),
    ("{", "$"),
    ("{}", "$"),
    ('{"a": {"$regex": "x"}}', "a.$regex"),
    ('{"$nor": []}', "$nor"),
    ('{"a": {"b": 1}}', "a.b"),
    ('{"a": [1]}', "a"),
    ('{"a[0]": 1}', "a[0]"),
    ('{"a..b": 1}', "a..b"),
    ('{"a.\\"b": 1}', 'a."b'),
    ('{"0": 1}', "0"),
    ('{"a": {"$in": 1}}', "a.$in"),
    ('{"a": {"$in": []}}', "a.$in"),
    ('{"a": {"$in": [' + ",".join(["1"] * 101) + "]}}", "a.$in"),
    ('{"a": {"$gt": true}}', "a.$gt"),
    ('{"a": {"$gt": null}}', "a.$gt"),
    ('{"a": {"$exists": 1}}', "a.$exists"),
    ('{"a": {"$contains": [1]}}', "a.$contains"),
    ('{"a": 99999999999999999999}', "a"),
    ('{"a": "\\u0000"}', "a"),
    ('{"$or": [{"$or": [{"$or": [{"$or": [{"a": 1}]}]}]}]}', "$or[0].$or[0].$or[0].$or[0]"),
    ("{" + ",".join(f'"k{i}": 1' for i in range(17)) + "}", "k16"),
    ('{"$and": {}}', "$and"),
]


@pytest.mark.parametrize(("where", "part"), BAD_WHERE)
def test_bad_where_is_invalid_query_naming_the_part(freeform, where, part):
    with pytest.raises(ArtifactError) as caught:
        selectors.artifacts_page(agent=freeform, where=where)
    assert caught.value.code == "invalid_query"
    assert caught.value.details["field"] == "where"
    assert caught.value.details["part"] == part


def test_where_longer_than_its_limit_is_refused(freeform):
    with pytest.raises(ArtifactError) as caught:
        selectors.artifacts_page(agent=freeform, where='{"a": "' + "x" * 5000 + '"}')
    assert caught.value.code == "invalid_query"


# --- the index's rules ---------------------------------------------------------------------------


def test_phrases_match_within_the_head_words_only():
    doc = search.document(
        kind="k",
        key=None,
        title=None,
        data=["w"] * (search.HEAD_WORDS - 1) + ["late word"],
        content=None,
    )
    assert doc.tail == ["late", "word"]
    vector = doc.tsvector()
    assert f"'late':{search.TAIL_POSITION}" in vector and f"'word':{search.TAIL_POSITION}" in vector


def test_backfill_indexes_records_stored_before_the_index(freeform):
    record = tag(freeform, "old", {"w": "rowan"}, contents="elderberry", content_type="text/plain")
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("UPDATE artifacts_app_artifact SET search_words = NULL")
        else:
            cursor.execute("DELETE FROM artifacts_app_artifact_fts")
            cursor.execute("DELETE FROM artifacts_app_artifact_fts_row")
        cursor.execute("UPDATE artifacts_app_blob SET words = NULL")
    assert found(freeform, q="rowan") == set()
    with connection.cursor() as cursor:
        assert [row[0] for row in _index.unindexed(cursor, after="", size=10)] == [record.record.id]
    assert services.search_backfill(batch=1) == 1
    assert found(freeform, q="rowan") == {"old"}
    assert found(freeform, q="elderberry") == {"old"}
    assert services.search_backfill(batch=1) == 0


def test_where_requiring_several_strings_and_q_together(notes):
    where = {"text": "quick thinking", "who.name": {"$in": ["Zoë", "Ana"]}}
    assert found(notes, where=where) == {"b"}
    assert found(notes, where={"$and": [{"text": "brown bread"}, {"flag": True}]}) == {"c"}
    assert found(notes, q="bread brown", where={"text": {"$in": ["brown bread", "x"]}}) == {"c"}
