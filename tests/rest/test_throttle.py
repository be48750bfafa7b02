"""Failed authentications are limited per client address (API.md "Limits on what a caller can make
the server do"): past ``ARTIFACTS_AUTH_FAILURE_LIMIT`` a bad credential answers 429
``too_many_attempts`` with ``Retry-After``. A good bearer token from the same address goes on; a
login page refuses even a right password without checking it until the window ends. REST bearer
tokens and the two login pages here, in the process; websockets, MCP and two processes sharing the
count in tests/consumers/test_throttle_live.py.

Each test fails from addresses of its own (at scale the counts live in Redis, which outlives a
test), so no count leaks from one test, or one run, into another.
"""

from __future__ import annotations

import secrets
import time

import pytest
from django.test import Client

from artifacts_app import throttle
from tests.rest.conftest import bearer
from tests.servers import free_port

LIMIT = 20
BAD = "aak_00000000_not-a-real-key-at-all"


def new_address() -> str:
    return "10.{}.{}.{}".format(*secrets.token_bytes(3))


@pytest.fixture
def limited(settings, db):
    settings.ARTIFACTS_AUTH_FAILURE_LIMIT = LIMIT
    settings.ARTIFACTS_AUTH_FAILURE_WINDOW = 60
    settings.ARTIFACTS_TRUSTED_PROXIES = []
    return settings


@pytest.fixture
def agent_key(reviewer):
    from artifacts_app import services

    return services.agent_key_create(agent=reviewer)[1]


def assert_too_many(response) -> None:
    assert response.status_code == 429, response.content[:300]
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "too_many_attempts"
    assert "valid credentials are accepted" in error["message"]
    assert 1 <= int(response["Retry-After"]) <= 60


def assert_invalid_token(response) -> None:
    assert response.status_code == 401, response.content[:300]
    assert response.json()["error"]["code"] == "invalid_token"


def test_a_burst_of_bad_tokens_is_refused_past_the_limit_while_a_good_caller_goes_on(
    limited, agent_key
):
    client = Client(REMOTE_ADDR=new_address())
    answers = []
    for _ in range(25):
        answers.append(client.get("/reviewer/v1/artifacts", **bearer(BAD)))
        good = client.get("/reviewer/v1/artifacts", **bearer(agent_key))
        assert good.status_code == 200, good.content[:300]
    for response in answers[:LIMIT]:
        assert_invalid_token(response)
    for response in answers[LIMIT:]:
        assert_too_many(response)
    # A bad credential on a write is refused the same way, and nothing is stored.
    tag = client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "k", "data": {}},
        content_type="application/json",
        **bearer(BAD),
    )
    assert_too_many(tag)
    listed = client.get("/reviewer/v1/artifacts", **bearer(agent_key)).json()
    assert listed["results"] == []


def test_a_malformed_bearer_header_counts_as_a_failure(limited):
    client = Client(REMOTE_ADDR=new_address())
    codes = [
        client.get("/reviewer/v1/artifacts", HTTP_AUTHORIZATION="Bearer").status_code
        for _ in range(LIMIT + 1)
    ]
    assert codes == [401] * LIMIT + [429]


def test_no_credentials_at_all_are_not_a_failed_authentication(limited, reviewer):
    client = Client(REMOTE_ADDR=new_address())
    codes = {client.get("/reviewer/v1/artifacts").status_code for _ in range(LIMIT + 5)}
    assert codes == {401}


def test_the_count_ends_with_its_window(limited, agent_key):
    limited.ARTIFACTS_AUTH_FAILURE_WINDOW = 2
    address = new_address()
    for _ in range(LIMIT):  # the limit's worth of failures, at once (a loaded machine is slow)
        throttle.failure(address)
    client = Client(REMOTE_ADDR=address)
    refused = client.get("/reviewer/v1/artifacts", **bearer(BAD))
    assert refused.status_code == 429 and refused["Retry-After"] in {"1", "2"}
    time.sleep(2.2)  # the window (2 s) is over
    assert_invalid_token(client.get("/reviewer/v1/artifacts", **bearer(BAD)))


def test_forwarded_for_is_ignored_from_an_untrusted_peer(limited, agent_key):
    client = Client(REMOTE_ADDR=new_address())
    codes = [
        client.get(
            "/reviewer/v1/artifacts", HTTP_X_FORWARDED_FOR=new_address(), **bearer(BAD)
        ).status_code
        for _ in range(LIMIT + 1)
    ]
    assert codes == [401] * LIMIT + [429]  # one peer, whatever it says it forwards


def test_forwarded_for_from_a_trusted_proxy_counts_each_client_apart(limited, agent_key):
    proxy = new_address()
    limited.ARTIFACTS_TRUSTED_PROXIES = [f"{proxy}/32", "192.0.2.0/24"]
    client = Client(REMOTE_ADDR=proxy)
    first, second = new_address(), new_address()

    def bad(forwarded: str) -> int:
        return client.get(
            "/reviewer/v1/artifacts", HTTP_X_FORWARDED_FOR=forwarded, **bearer(BAD)
        ).status_code

    assert [bad(first) for _ in range(LIMIT)] == [401] * LIMIT
    assert bad(first) == 429
    # Another client behind the same proxy has its own count...
    assert [bad(second) for _ in range(LIMIT)] == [401] * LIMIT
    # ...and what a client writes left of what the proxies saw is not believed: the rightmost
    # untrusted hop (behind a second trusted proxy, 192.0.2.7) is the client.
    assert bad(f"{new_address()}, {first}, 192.0.2.7") == 429
    assert bad(f"{first}, {second}") == 429
    assert bad(new_address()) == 401
    # The proxy's own address is never the one counted.
    assert client.get("/reviewer/v1/artifacts", **bearer(agent_key)).status_code == 200


@pytest.mark.parametrize(
    ("peer", "forwarded", "counted"),
    [
        ("203.0.113.9", [], "203.0.113.9"),
        ("::ffff:203.0.113.9", [], "203.0.113.9"),
        ("2001:db8:1:2:3:4:5:6", [], "2001:db8:1:2::/64"),  # one host's usual block
        ("203.0.113.9", ["198.51.100.1"], "203.0.113.9"),  # an untrusted peer
        ("127.0.0.1", ["198.51.100.1"], "198.51.100.1"),
        ("127.0.0.1", ["198.51.100.1:4711"], "198.51.100.1"),
        ("127.0.0.1", ["[2001:db8::1]:443"], "2001:db8::/64"),
        ("127.0.0.1", ["198.51.100.1, 127.0.0.2"], "198.51.100.1"),  # both hops trusted
        ("127.0.0.1", ["198.51.100.1", "198.51.100.2"], "198.51.100.2"),  # two headers
        ("127.0.0.1", ["unknown"], "127.0.0.1"),  # not an address: the last trusted hop
        ("127.0.0.1", ["127.0.0.3"], "127.0.0.3"),  # every hop trusted: the leftmost
        (None, [], throttle.UNKNOWN),
    ],
)
def test_the_counted_address(settings, peer, forwarded, counted):
    settings.ARTIFACTS_TRUSTED_PROXIES = ["127.0.0.0/8"]
    assert throttle.client_address(peer, forwarded) == counted


def test_bad_tokens_answer_401_while_the_counting_cache_is_down(limited):
    # A cache that does not answer (Redis gone): failures go uncounted, never a 500.
    limited.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    client = Client(REMOTE_ADDR=new_address())
    for _ in range(3):
        assert_invalid_token(client.get("/reviewer/v1/artifacts", **bearer(BAD)))


# --- the login pages ------------------------------------------------------------------------


LOGIN_PAGES = [("/admin/login/", "staff"), ("/accounts/login/", "alice")]
RIGHT = "the-right-pw-123"


def login_user(django_user_model, user: str):
    return django_user_model.objects.create_user(user, password=RIGHT, is_staff=user == "staff")


def assert_login_refused(response, client, person) -> None:
    """429 for the limit, and the password never checked: ``authenticate`` would have set
    ``last_login`` on a right one, and no session was opened."""
    assert response.status_code == 429, response.status_code
    assert response["Content-Type"].startswith("text/html")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert b"Too many failed authentications from this address" in response.content
    assert b"whatever the password" in response.content
    assert "_auth_user_id" not in client.session
    assert "sessionid" not in response.cookies
    person.refresh_from_db()
    assert person.last_login is None


@pytest.mark.parametrize(("path", "user"), LOGIN_PAGES)
def test_past_the_limit_the_login_pages_refuse_even_a_right_password_without_checking_it(
    limited, django_user_model, path, user
):
    person = login_user(django_user_model, user)
    client = Client(REMOTE_ADDR=new_address())
    for _ in range(LIMIT):
        page = client.post(path, {"username": user, "password": "wrong"})
        assert page.status_code == 200, page.status_code  # the form again, with its error
    assert_login_refused(client.post(path, {"username": user, "password": "wrong"}), client, person)
    # A right password is refused the same way: a guesser learns nothing from the answer.
    assert_login_refused(client.post(path, {"username": user, "password": RIGHT}), client, person)
    # The page itself still shows; another browser at another address was never limited.
    assert client.get(path).status_code == 200
    elsewhere = Client(REMOTE_ADDR=new_address())
    assert elsewhere.post(path, {"username": user, "password": "wrong"}).status_code == 200
    logged_in = elsewhere.post(path, {"username": user, "password": RIGHT})
    assert logged_in.status_code == 302
    assert elsewhere.session["_auth_user_id"] == str(person.pk)


@pytest.mark.parametrize(("path", "user"), LOGIN_PAGES)
def test_a_right_password_logs_in_again_once_the_window_ends(
    limited, django_user_model, path, user
):
    limited.ARTIFACTS_AUTH_FAILURE_WINDOW = 2
    person = login_user(django_user_model, user)
    address = new_address()
    for _ in range(LIMIT):  # the limit's worth of failures, at once (a loaded machine is slow)
        throttle.failure(address)
    client = Client(REMOTE_ADDR=address)
    refused = client.post(path, {"username": user, "password": RIGHT})
    assert_login_refused(refused, client, person)
    assert refused["Retry-After"] in {"1", "2"}
    time.sleep(2.2)  # the window (2 s) is over
    right = client.post(path, {"username": user, "password": RIGHT})
    assert right.status_code == 302, right.status_code
    assert client.session["_auth_user_id"] == str(person.pk)
    person.refresh_from_db()
    assert person.last_login is not None


def test_a_logged_in_person_is_not_affected_by_their_address_being_limited(
    limited, django_user_model
):
    person = login_user(django_user_model, "staff")
    address = new_address()
    client = Client(REMOTE_ADDR=address)
    assert client.post("/admin/login/", {"username": "staff", "password": RIGHT}).status_code == 302
    for _ in range(LIMIT):  # a guesser at the same address, after the login
        throttle.failure(address)
    assert throttle.exceeded(address) is not None
    assert client.get("/admin/").status_code == 200
    assert client.get("/accounts/login/").status_code == 200
    assert client.session["_auth_user_id"] == str(person.pk)


def test_the_login_pages_check_passwords_while_the_counting_cache_is_down(
    limited, django_user_model
):
    # Nothing read, nothing counted: the page answers as it would without the limit.
    limited.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    person = login_user(django_user_model, "staff")
    client = Client(REMOTE_ADDR=new_address())
    assert (
        client.post("/admin/login/", {"username": "staff", "password": "wrong"}).status_code == 200
    )
    assert client.post("/admin/login/", {"username": "staff", "password": RIGHT}).status_code == 302
    assert client.session["_auth_user_id"] == str(person.pk)


def test_exceeded_reads_the_count_without_counting(limited):
    address = new_address()
    for _ in range(50):
        assert throttle.exceeded(address) is None  # never a failure, however often asked
    for _ in range(LIMIT - 1):
        throttle.failure(address)
    assert throttle.exceeded(address) is None
    throttle.failure(address)  # the limit's last allowed failure: the next would be refused
    too_many = throttle.exceeded(address)
    assert too_many is not None and too_many.code == "too_many_attempts"
    assert 1 <= too_many.retry_after <= 60
    with pytest.raises(type(too_many)):
        throttle.failure(address)


def test_a_non_staff_user_at_the_admin_login_counts_as_a_failure(limited, alice):
    client = Client(REMOTE_ADDR=new_address())
    for _ in range(LIMIT):
        assert (
            client.post(
                "/admin/login/", {"username": "alice", "password": "alice-pw-123"}
            ).status_code
            == 200
        )
    last = client.post("/admin/login/", {"username": "alice", "password": "alice-pw-123"})
    assert last.status_code == 429


def test_the_login_pages_still_show_their_forms(limited, db):
    client = Client(REMOTE_ADDR=new_address())
    assert client.get("/admin/login/").status_code == 200
    assert client.get("/accounts/login/").status_code == 200
