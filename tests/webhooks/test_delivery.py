"""Delivery by the rules of API.md "Webhooks", to a real receiver: Standard Webhooks signatures
(verified by the official library), seq order across retries, 410 and give-up, no redirects, the
timeout, rotation, replay, filters, retention. Runs on both profiles."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import orjson
import pytest
from django.test import Client
from django.utils import timezone
from standardwebhooks import Webhook as Verifier
from standardwebhooks import WebhookVerificationError

from artifacts_app import services
from artifacts_app.models import Event
from tests.webhooks.conftest import tag, until
from tests.webhooks.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)


def api(agent, method: str, path: str, body: dict | None = None):
    _, key = services.agent_key_create(agent=agent)
    response = Client().generic(
        method,
        f"/{agent.slug}/v1/{path}",
        data=orjson.dumps(body) if body is not None else b"",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    return response.status_code, (orjson.loads(response.content) if response.content else None)


def create(agent, url: str, **fields) -> dict:
    status, body = api(agent, "POST", "webhooks", {"url": url, **fields})
    assert status == 201, body
    return body


def state(agent, webhook_id: str) -> dict:
    status, body = api(agent, "GET", f"webhooks/{webhook_id}")
    assert status == 200, body
    return body


def test_events_arrive_signed_as_standard_webhooks_define(agent, receiver, deliverer):
    hook = create(agent, receiver.url())
    assert hook["secret"].startswith("whsec_") and hook["id"].startswith("wh_")
    last = tag(agent, 3)
    got = receiver.wait(3)
    stored = {e.seq: e.payload for e in Event.objects.filter(agent=agent)}
    verifier = Verifier(hook["secret"])
    for request in got:
        event = verifier.verify(request.body, request.headers)  # raises when it does not verify
        assert event == {**stored[event["seq"]], "agent": agent.slug}
        assert request.headers["content-type"] == "application/json"
        assert request.headers["webhook-signature"].startswith("v1,")
        assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60
    assert [r.event["seq"] for r in got] == [last - 2, last - 1, last]
    assert len({r.headers["webhook-id"] for r in got}) == 3
    body = until(lambda: (b := state(agent, hook["id"]))["pending"] == 0 and b, "nothing pending")
    assert body["lastDelivery"]["seq"] == last and body["lastDelivery"]["status"] == 204
    assert body["active"] is True and body["disabledReason"] is None and "secret" not in body
    tampered = dict(got[0].headers, **{"webhook-id": "msg_other"})
    with pytest.raises(WebhookVerificationError):
        verifier.verify(got[0].body, tampered)


def counted(outcome: str) -> float:
    from prometheus_client import REGISTRY

    found = REGISTRY.get_sample_value("artifacts_webhook_deliveries_total", {"outcome": outcome})
    return found or 0.0


def test_order_holds_across_retries_and_the_id_stays(agent, deliverer):
    def answer(n, r):
        return Reply(500) if n < 3 else Reply(200)

    failed, delivered = counted("failed"), counted("delivered")
    with Receiver(answer) as receiver:
        hook = create(agent, receiver.url())
        last = tag(agent, 4)
        got = receiver.wait(7)
    seqs = [r.event["seq"] for r in got]
    first = last - 3
    assert seqs == [first, first, first, first, first + 1, first + 2, first + 3]
    assert len({r.headers["webhook-id"] for r in got[:4]}) == 1
    status, page = api(agent, "GET", f"webhooks/{hook['id']}/deliveries")
    assert status == 200
    attempts = [(d["seq"], d["attempt"], d["status"]) for d in reversed(page["results"])]
    assert attempts[:4] == [(first, 1, 500), (first, 2, 500), (first, 3, 500), (first, 4, 200)]
    body = state(agent, hook["id"])
    assert body["failingSince"] is None and body["pending"] == 0
    assert counted("failed") - failed == 3 and counted("delivered") - delivered == 4


def test_a_410_deactivates_with_a_reason(agent, deliverer):
    with Receiver(lambda n, r: Reply(410)) as receiver:
        hook = create(agent, receiver.url())
        tag(agent, 2)
        receiver.wait(1)
        body = until(lambda: (b := state(agent, hook["id"]))["active"] is False and b, "inactive")
        time.sleep(0.3)
        assert len(receiver.got()) == 1  # nothing after the 410
    assert "410" in body["disabledReason"] and body["pending"] == 2


def test_give_up_deactivates_and_reactivation_resumes_at_the_same_event(
    agent, hook_settings, deliverer
):
    hook_settings.ARTIFACTS_WEBHOOK_GIVE_UP = 0.4
    healthy = {"ok": False}
    with Receiver(lambda n, r: Reply(200 if healthy["ok"] else 503)) as receiver:
        hook = create(agent, receiver.url())
        last = tag(agent, 2)
        body = until(lambda: (b := state(agent, hook["id"]))["active"] is False and b, "given up")
        assert "ARTIFACTS_WEBHOOK_GIVE_UP" in body["disabledReason"]
        assert body["failingSince"] is not None
        healthy["ok"] = True
        status, body = api(agent, "PATCH", f"webhooks/{hook['id']}", {"active": True})
        assert status == 200 and body["active"] and body["disabledReason"] is None
        until(lambda: state(agent, hook["id"])["pending"] == 0, "delivered after reactivation")
        delivered = [r.event["seq"] for r in receiver.got()][-2:]
    assert delivered == [last - 1, last]


def test_redirects_are_not_followed(agent, deliverer):
    def answer(n, r):
        if r.path == "/hook":
            return Reply(307, headers={"Location": "/elsewhere"})
        return Reply(200)

    with Receiver(answer) as receiver:
        hook = create(agent, receiver.url())
        tag(agent, 1)
        receiver.wait(2)
        status, page = api(agent, "GET", f"webhooks/{hook['id']}/deliveries")
        assert {d["status"] for d in page["results"]} == {307}
        assert state(agent, hook["id"])["pending"] == 1
        assert receiver.got("/elsewhere") == []


def test_a_receiver_that_never_answers_times_out(agent, hook_settings, deliverer):
    hook_settings.ARTIFACTS_WEBHOOK_TIMEOUT = 0.3
    with Receiver(lambda n, r: Reply(200, delay=3 if n == 0 else 0)) as receiver:
        hook = create(agent, receiver.url())
        tag(agent, 1)
        until(lambda: state(agent, hook["id"])["pending"] == 0, "delivered on the second try")
    status, page = api(agent, "GET", f"webhooks/{hook['id']}/deliveries")
    first = page["results"][-1]
    assert first["status"] is None and "0.3 s" in first["error"] and first["durationMs"] < 2000


def test_a_huge_answer_is_not_read_whole(agent, deliverer):
    with Receiver(lambda n, r: Reply(200, body=b"x" * 20_000_000)) as receiver:
        hook = create(agent, receiver.url())
        tag(agent, 2)
        until(lambda: state(agent, hook["id"])["pending"] == 0, "delivered")


def test_rotation_signs_with_the_new_secret_only(agent, receiver, deliverer):
    hook = create(agent, receiver.url())
    tag(agent, 1)
    receiver.wait(1)
    status, rotated = api(agent, "POST", f"webhooks/{hook['id']}/secret")
    assert status == 200 and rotated["secret"] != hook["secret"]
    tag(agent, 1)
    request = receiver.wait(2)[1]
    Verifier(rotated["secret"]).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Verifier(hook["secret"]).verify(request.body, request.headers)
    assert "secret" not in state(agent, hook["id"])


def test_replay_sends_again_after_a_seq_under_new_ids(agent, receiver, deliverer):
    hook = create(agent, receiver.url())
    last = tag(agent, 3)
    first = receiver.wait(3)
    status, body = api(agent, "POST", f"webhooks/{hook['id']}/replay", {"after": last - 2})
    assert status == 200
    again = receiver.wait(5)[3:]
    assert [r.event["seq"] for r in again] == [last - 1, last]
    assert {r.headers["webhook-id"] for r in again}.isdisjoint(
        r.headers["webhook-id"] for r in first
    )
    status, body = api(agent, "POST", f"webhooks/{hook['id']}/replay", {"after": -1})
    assert status == 400 and body["error"]["code"] == "invalid_after"


def test_filters_select_types_and_kinds(agent, receiver, deliverer):
    create(agent, receiver.url(), kinds=["report"], events=["artifact.tagged"])
    tag(agent, 2, kind="note")
    last = tag(agent, 1, kind="report")
    record = services.artifact_tag(agent=agent, kind="report", key="gone", data={})
    services.artifact_delete(agent=agent, artifact_id=record.record.id)
    got = receiver.wait(2)
    time.sleep(0.3)
    assert [r.event["seq"] for r in receiver.got()] == [last, last + 1]
    assert {r.event["record"]["kind"] for r in got} == {"report"}


def test_a_cursor_behind_the_retention_is_told(agent, hook_settings, deliverer):
    hook_settings.ARTIFACTS_WEBHOOK_RETRY_DELAYS = [0.5]
    with Receiver(lambda n, r: Reply(503)) as receiver:
        hook = create(agent, receiver.url())
        tag(agent, 2)
        receiver.wait(1)
        # The events go before the next try (a receiver away longer than the retention).
        services.events_prune(before=timezone.now() + timedelta(seconds=1))
        body = until(lambda: (b := state(agent, hook["id"]))["active"] is False and b, "told")
    assert "ARTIFACTS_EVENT_RETENTION" in body["disabledReason"]


def test_the_secret_is_never_logged(agent, deliverer, caplog):
    caplog.set_level(logging.DEBUG)
    with Receiver(lambda n, r: Reply(500 if n < 2 else 410)) as receiver:
        hook = create(agent, receiver.url())
        tag(agent, 1)
        until(lambda: state(agent, hook["id"])["active"] is False, "deactivated")
    assert "webhook" in caplog.text
    assert hook["secret"] not in caplog.text
    assert hook["secret"].removeprefix("whsec_") not in caplog.text


def test_deliveries_are_paged_newest_first(agent, deliverer):
    with Receiver() as receiver:
        hook = create(agent, receiver.url())
        last = tag(agent, 3)
        until(lambda: state(agent, hook["id"])["pending"] == 0, "delivered")
    status, page = api(agent, "GET", f"webhooks/{hook['id']}/deliveries?limit=2")
    assert [d["seq"] for d in page["results"]] == [last, last - 1] and page["next"]
    status, rest = api(agent, "GET", page["next"].split("/v1/", 1)[1])
    assert [d["seq"] for d in rest["results"]] == [last - 2] and rest["next"] is None
    status, body = api(agent, "GET", f"webhooks/{hook['id']}/deliveries?cursor=nope")
    assert status == 400 and body["error"]["code"] == "invalid_cursor"


def test_the_delivery_log_is_kept_as_long_as_the_events(agent, receiver, deliverer):
    from artifacts_app.models import WebhookDelivery
    from artifacts_app.webhooks import engine

    hook = create(agent, receiver.url())
    tag(agent, 2)
    until(lambda: state(agent, hook["id"])["pending"] == 0, "delivered")
    assert engine.prune_log() == 0  # younger than the retention
    later = timezone.now() + timedelta(days=8)  # past the default 7 days
    assert engine.prune_log(later) == 2
    assert not WebhookDelivery.objects.exists()
    assert "secret=" not in repr(
        engine.Claim(
            pk=1, public_id="wh_x", agent_id=1, slug="s", url="u", events=[], kinds=[],
            secret="whsec_zzz", generation=0, replays=0, replay_upto=0, upto=0, token="t",
            cursor=0, attempts=0, failing_since=None, next_attempt_at=timezone.now(),
        )
    )  # fmt: skip
