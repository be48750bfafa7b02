from __future__ import annotations

import pytest


@pytest.fixture
def staff(django_user_model):
    """A supervisor: staff, no model permissions at all (API.md: staff read everything)."""
    return django_user_model.objects.create_user("sam", password="sam-pw-123", is_staff=True)


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("root", password="root-pw-123")


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def super_client(client, superuser):
    client.force_login(superuser)
    return client


@pytest.fixture
def keeper(django_user_model):
    """Staff holding the API key permissions (API.md: they, and superusers, mint and revoke)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("kim", password="kim-pw-123", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="artifacts_app", codename__in=["add_apikey", "change_apikey"]
        )
    )
    return user


@pytest.fixture
def keeper_client(keeper):
    from django.test import Client

    client = Client()
    client.force_login(keeper)
    return client
