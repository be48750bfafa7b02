"""The admin lists webhooks with their state and deliveries, and replays, deactivates and
reactivates them (through the services), for staff holding the webhook permissions."""

from __future__ import annotations

import pytest
from django.test import Client

from artifacts_app import services
from artifacts_app.models import Webhook
from tests.webhooks.conftest import tag, until
from tests.webhooks.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)
LIST = "/admin/artifacts_app/webhook/"


@pytest.fixture
def root(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="root-pw-123"))
    return client


def act(client: Client, action: str, webhook: Webhook) -> None:
    response = client.post(LIST, {"action": action, "_selected_action": [webhook.pk]})
    assert response.status_code == 302, response.content[:500]


def test_staff_without_the_permission_see_no_webhooks(agent, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("sam", password="x", is_staff=True))
    assert client.get(LIST).status_code == 403


def test_the_admin_shows_state_and_deliveries_and_acts(agent, root, deliverer):
    answers = {"status": 410}
    with Receiver(lambda n, r: Reply(answers["status"])) as receiver:
        webhook, secret = services.webhook_create(agent=agent, url=receiver.url())
        tag(agent, 2)
        until(lambda: not Webhook.objects.get(pk=webhook.pk).active, "deactivated by the 410")
        page = root.get(LIST).content.decode()
        assert webhook.public_id in page and "inactive: the receiver answered 410" in page
        detail = root.get(f"{LIST}{webhook.pk}/change/").content.decode()
        assert "Recent deliveries" in detail and "<td>410</td>" in detail
        assert secret not in page and secret not in detail

        answers["status"] = 200
        act(root, "reactivate", webhook)
        until(lambda: len(receiver.got()) == 3, "both events delivered after reactivation")
        act(root, "replay_stored", webhook)
        until(lambda: len(receiver.got()) == 5, "the stored events delivered again")
        act(root, "deactivate", webhook)
        found = Webhook.objects.get(pk=webhook.pk)
        assert not found.active and found.disabled_reason == "deactivated in the admin by root"
