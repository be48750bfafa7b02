"""The URL rule and the address rule (API.md "Webhooks", "URLs"): refused at creation with 400
`invalid_webhook_url` and nothing made; checked again on the address actually connected to."""

from __future__ import annotations

import ipaddress

import pytest

from artifacts_app import services
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Webhook
from artifacts_app.webhooks import targets
from tests.webhooks.conftest import tag, until
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_delivery import api, create, state

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED_URLS = [
    "ftp://93.184.216.34/hook",
    "https://user:pw@93.184.216.34/hook",
    "https://93.184.216.34/hook#part",
    "https://bücher.example/hook",
    "https://xn--bcher-kva.example/hook",
    "https://93.184.216.34:22/hook",
    "https://93.184.216.34:99999/hook",
    "https://localhost/hook",  # a name that resolves to a loopback address
    "https://127.0.0.1/hook",
    "https://2130706433/hook",
    "https://10.0.0.1/hook",
    "https://172.16.5.4/hook",
    "https://192.168.1.1/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://100.64.0.1/hook",
    "https://0.0.0.0/hook",
    "https://0.1.2.3/hook",
    "https://224.0.0.1/hook",
    "https://[::1]/hook",
    "https://[::]/hook",
    "https://[fe80::1]/hook",
    "https://[fd00:ec2::254]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::ffff:8.8.8.8]/hook",
    "https://[64:ff9b::808:808]/hook",
    "https://[2002:7f00:1::]/hook",
    "https://[ff02::1]/hook",
    "",
    "https:///hook",
    "https://exa mple.com/hook",
]


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_refused_at_creation(agent, hook_settings, url):
    hook_settings.ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS = []
    status, body = api(agent, "POST", "webhooks", {"url": url})
    assert status == 400, body
    assert body["error"]["code"] == "invalid_webhook_url"
    assert not Webhook.objects.exists()


def test_plain_http_needs_the_development_setting(agent, hook_settings):
    hook_settings.ARTIFACTS_WEBHOOK_ALLOW_HTTP = False
    status, body = api(agent, "POST", "webhooks", {"url": "http://93.184.216.34/hook"})
    assert status == 400 and body["error"]["code"] == "invalid_webhook_url"


def test_a_public_address_is_accepted(agent):
    status, body = api(agent, "POST", "webhooks", {"url": "https://93.184.216.34:8443/in?x=1"})
    assert status == 201, body
    assert body["url"] == "https://93.184.216.34:8443/in?x=1"


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "169.254.169.254", "100.100.100.200", "::ffff:1.2.3.4", "64:ff9b::1"],
)
def test_the_address_rule_refuses_inside_addresses(address, hook_settings):
    hook_settings.ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS = []
    assert targets.address_problem(ipaddress.ip_address(address)) is not None


def test_allowed_networks_open_the_rule(hook_settings):
    hook_settings.ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert targets.address_problem(ipaddress.ip_address("10.1.2.3")) is None
    assert targets.address_problem(ipaddress.ip_address("192.168.0.1")) is not None
    assert targets.address_problem(ipaddress.ip_address("8.8.8.8")) is None


def test_an_address_forbidden_later_fails_each_attempt_with_a_reason(
    agent, hook_settings, deliverer
):
    with Receiver() as receiver:
        hook = create(agent, f"http://localhost:{receiver.port}/hook")  # resolves to 127.0.0.1
        hook_settings.ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS = []  # the address is now forbidden
        tag(agent, 1)
        until(
            lambda: len(api(agent, "GET", f"webhooks/{hook['id']}/deliveries")[1]["results"]) >= 2,
            "two tries",
        )
        assert receiver.got() == []
    _, page = api(agent, "GET", f"webhooks/{hook['id']}/deliveries")
    assert all(
        d["status"] is None and "not a public address" in d["error"] for d in page["results"]
    )
    assert state(agent, hook["id"])["pending"] == 1


def test_unknown_event_types_and_kinds_are_named(agent, reviewer):
    status, body = api(
        agent,
        "POST",
        "webhooks",
        {"url": "https://93.184.216.34/", "events": ["artifact.tagged", "artifact.exploded"]},
    )
    assert status == 400 and body["error"]["code"] == "unknown_event_type"
    assert "artifact.exploded" in body["error"]["message"]
    status, body = api(
        reviewer,
        "POST",
        "webhooks",
        {"url": "https://93.184.216.34/", "kinds": ["reviewed-pr", "nope"]},
    )
    assert (
        status == 400
        and body["error"]["code"] == "unknown_kind"
        and "nope" in body["error"]["message"]
    )
    status, body = api(
        agent, "POST", "webhooks", {"url": "https://93.184.216.34/", "events": "artifact.tagged"}
    )
    assert status == 400 and body["error"]["code"] == "invalid_events"
    status, body = api(
        agent, "POST", "webhooks", {"url": "https://93.184.216.34/", "secret": "mine"}
    )
    assert status == 400 and body["error"]["code"] == "unknown_field"
    assert not Webhook.objects.exists()


def test_webhooks_per_agent_are_capped(agent, hook_settings):
    hook_settings.ARTIFACTS_WEBHOOK_MAX_PER_AGENT = 2
    for _ in range(2):
        services.webhook_create(agent=agent, url="https://93.184.216.34/")
    with pytest.raises(ArtifactError) as refused:
        services.webhook_create(agent=agent, url="https://93.184.216.34/")
    assert refused.value.code == "too_many_webhooks"
    status, body = api(agent, "POST", "webhooks", {"url": "https://93.184.216.34/"})
    assert status == 400 and body["error"]["code"] == "too_many_webhooks"
    assert Webhook.objects.count() == 2


def test_patch_and_delete(agent, hook_settings):
    hook_settings.ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS = []
    hook = create(agent, "https://93.184.216.34/a", description="first")
    status, body = api(agent, "PATCH", f"webhooks/{hook['id']}", {"url": "https://127.0.0.1/"})
    assert status == 400 and body["error"]["code"] == "invalid_webhook_url"
    status, body = api(
        agent,
        "PATCH",
        f"webhooks/{hook['id']}",
        {"description": "second", "events": ["artifact.pinned"]},
    )
    assert (
        status == 200 and body["description"] == "second" and body["events"] == ["artifact.pinned"]
    )
    status, body = api(agent, "PATCH", f"webhooks/{hook['id']}", {"active": "no"})
    assert status == 400 and body["error"]["code"] == "invalid_active"
    status, body = api(agent, "GET", "webhooks")
    assert [w["id"] for w in body["results"]] == [hook["id"]]
    assert api(agent, "DELETE", f"webhooks/{hook['id']}")[0] == 204
    status, body = api(agent, "GET", f"webhooks/{hook['id']}")
    assert status == 404 and body["error"]["code"] == "unknown_webhook"
