from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.conf import settings

from artifacts_app import services
from artifacts_app.models import Agent

TEST_AGENTS = {
    "reviewer": "agent_site.agents.reviewer",
    "strict": "tests.agents.strict",
}


@pytest.fixture(autouse=True)
def _isolated_storage(settings, tmp_path: Path):
    """Each test gets its own blob directory, so blob assertions see only their own files."""
    storages = {name: dict(conf) for name, conf in settings.STORAGES.items()}
    if storages["artifacts"]["BACKEND"].endswith("FileSystemStorage"):
        storages["artifacts"]["OPTIONS"] = {"location": tmp_path / "blobs"}
        settings.STORAGES = storages
    settings.ARTIFACTS_AGENTS = dict(TEST_AGENTS)
    yield
    shutil.rmtree(tmp_path / "blobs", ignore_errors=True)


@pytest.fixture
def reviewer(db) -> Agent:
    return Agent.objects.get_or_create(
        slug="reviewer", defaults={"module": TEST_AGENTS["reviewer"]}
    )[0]


@pytest.fixture
def strict(db) -> Agent:
    return Agent.objects.get_or_create(
        slug="strict", defaults={"module": TEST_AGENTS["strict"], "max_artifacts": 5}
    )[0]


@pytest.fixture
def freeform(db) -> Agent:
    return services.agent_create(slug="free", max_artifacts=1000)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-pw-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-pw-123")


def blob_files() -> list[Path]:
    root = Path(settings.STORAGES["artifacts"]["OPTIONS"]["location"])
    return (
        [p for p in root.rglob("*") if p.is_file() and ".incoming" not in p.parts]
        if root.exists()
        else []
    )


SCALE = os.environ.get("ARTIFACTS_PROFILE") == "scale"


def pytest_collection_modifyitems(config, items):
    """Tests marked `scale` need this machine's PostgreSQL and Redis; .ci/run provides them."""
    if SCALE:
        return
    skip = pytest.mark.skip(reason="scale profile only: run with ARTIFACTS_PROFILE=scale (.ci/run)")
    for item in items:
        if "scale" in item.keywords:
            item.add_marker(skip)
