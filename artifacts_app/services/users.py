"""Users the site makes itself (the demo's): people are otherwise made in the admin."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction


@transaction.atomic
def user_set(*, username: str, password: str, email: str = "", staff: bool = False) -> Any:
    """Make or update the user ``username`` with this password (``staff``: a superuser)."""
    model: Any = get_user_model()
    user, _ = model.objects.get_or_create(username=username, defaults={"email": email})
    if staff:
        user.is_staff = user.is_superuser = True
    user.set_password(password)
    user.save()
    return user
