from __future__ import annotations

import gc
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from artifacts_app import services
from artifacts_app.models import Agent
from tests.servers import free_port

TEST_AGENTS = {
    "reviewer": "agent_site.agents.reviewer",
    "strict": "tests.agents.strict",
    "historic": "tests.agents.historic",
}


@pytest.fixture(scope="session", autouse=True)
def _close_worker_connections(django_db_setup, django_db_blocker):
    """Connections opened on threads the tests do not own — asgiref's one thread for sync code
    called from async code without a request (channels' ``database_sync_to_async``) — stay open
    after the tests; PostgreSQL then refuses to drop the test database ("being accessed by other
    users"). Close them in their own thread before the database is dropped."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    with django_db_blocker.unblock():
        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)
    gc.collect()  # connections of threads that ended but are still referenced from a cycle


@pytest.fixture(scope="session", autouse=True)
def _fast_passwords():
    """Every user a test makes in this process is hashed by one round of PBKDF2 (tests/hashers.py)."""
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.hashers.OneRoundPBKDF2PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _isolated_storage(settings, tmp_path: Path, _s3_server):
    """Each test gets its own blob directory (or S3 prefix) and upload temp directory, so blob
    assertions and gc_blobs' sweeps see only their own files."""
    storages = {name: dict(conf) for name, conf in settings.STORAGES.items()}
    if storages["artifacts"]["BACKEND"].endswith("FileSystemStorage"):
        storages["artifacts"]["OPTIONS"] = {"location": tmp_path / "blobs"}
        settings.STORAGES = storages
    elif _s3_server is not None:
        options = dict(storages["artifacts"]["OPTIONS"])
        options["location"] = f"t-{uuid.uuid4().hex}"
        storages["artifacts"]["OPTIONS"] = options
        settings.STORAGES = storages
    settings.ARTIFACTS_AGENTS = dict(TEST_AGENTS)
    # Temporary upload files too (Django's spool; BlobWriter's with S3): gc_blobs' sweep in a test
    # of one xdist worker removed a live upload's file of the other's from the shared var/tmp.
    (tmp_path / "upload-tmp").mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "upload-tmp")
    yield
    shutil.rmtree(tmp_path / "blobs", ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _servers_deliver_no_webhooks():
    """No process of the tests delivers webhooks by itself: the tests of webhooks run their own
    deliverers (tests/webhooks/). Servers the tests start inherit it from the environment."""
    from django.test.utils import override_settings

    saved = os.environ.get("ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER")
    os.environ["ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER"] = "0"
    with override_settings(ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER=False):
        yield
    if saved is None:
        os.environ.pop("ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER", None)
    else:
        os.environ["ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER"] = saved


UNLIMITED_AUTH_FAILURES = "1000000"


@pytest.fixture(scope="session", autouse=True)
def _servers_auth_failures_not_limited():
    """The same for the servers the tests start (they inherit this environment): at scale their
    counts live in Redis for a minute, shared by every server of the run, all seeing 127.0.0.1."""
    saved = os.environ.get("ARTIFACTS_AUTH_FAILURE_LIMIT")
    os.environ["ARTIFACTS_AUTH_FAILURE_LIMIT"] = UNLIMITED_AUTH_FAILURES
    yield
    if saved is None:
        os.environ.pop("ARTIFACTS_AUTH_FAILURE_LIMIT", None)
    else:
        os.environ["ARTIFACTS_AUTH_FAILURE_LIMIT"] = saved


@pytest.fixture(autouse=True)
def _auth_failures_not_limited(settings):
    """Tests not about failed-authentication throttling send bad credentials from 127.0.0.1 at
    will, many per second across a run: the limit is raised out of their way here (and for the
    servers they start, above). The throttle's own tests (tests/rest/test_throttle.py,
    tests/consumers/test_throttle_live.py) set it back, each from addresses of its own."""
    settings.ARTIFACTS_AUTH_FAILURE_LIMIT = int(UNLIMITED_AUTH_FAILURES)


@pytest.fixture(autouse=True)
def _validation_shares_forgotten():
    """Each test starts with every agent's share of validation time full (jsonschemas.SHARE is
    the process's, and the tests' agents have the same slugs): a costly test leaves no debt."""
    from artifacts_app import jsonschemas

    jsonschemas.SHARE.forget()


@pytest.fixture
async def closed_hub():
    """Close the test loop's fan-out hub (its layer reader and watcher, its pools) while the loop
    still runs: left to the runner's one cancellation at loop close, a cancellation swallowed
    under the reader (Redis client) kept it retrying and the teardown hung. Used by the tests that
    open streams in this process (tests/consumers, tests/services/test_events.py)."""
    yield
    from artifacts_app import fanout

    await fanout.close_hub()


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
def historic(db) -> Agent:
    return Agent.objects.get_or_create(
        slug="historic", defaults={"module": TEST_AGENTS["historic"], "max_artifacts": 4}
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
    if not settings.STORAGES["artifacts"]["BACKEND"].endswith("FileSystemStorage"):
        from artifacts_app.blobs import blob_name
        from artifacts_app.services.blobs import _stored_names

        return [Path(blob_name(sha)) for sha in _stored_names()]
    root = Path(settings.STORAGES["artifacts"]["OPTIONS"]["location"])
    return (
        [p for p in root.rglob("*") if p.is_file() and ".incoming" not in p.parts]
        if root.exists()
        else []
    )


SCALE = os.environ.get("ARTIFACTS_PROFILE") == "scale"


@pytest.fixture(scope="session")
def _s3_server():
    """Scale profile: blobs go to S3 — moto's server mode on a free port, started and stopped here.

    The environment is set too, so server processes that tests start use the same bucket.
    """
    if not SCALE:
        yield None
        return
    from django.test.utils import override_settings

    port = free_port()
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    # A bound for a failure, not a wait: the loop ends when the port answers.
    deadline = time.monotonic() + 120
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)
    env = {
        "ARTIFACTS_STORAGE": "s3",
        "ARTIFACTS_S3_BUCKET": "artifacts-ci",
        "ARTIFACTS_S3_ENDPOINT_URL": endpoint,
        "ARTIFACTS_S3_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="artifacts-ci"
    )
    from agent_site.settings import s3_storage_from_env

    override = override_settings(
        STORAGES={**settings.STORAGES, "artifacts": s3_storage_from_env()}, ARTIFACTS_STORAGE="s3"
    )
    override.enable()
    try:
        yield endpoint
    finally:
        override.disable()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def pytest_collection_modifyitems(config, items):
    """Tests marked `scale` need this machine's PostgreSQL and Redis; .ci/run provides them."""
    if SCALE:
        return
    skip = pytest.mark.skip(reason="scale profile only: run with ARTIFACTS_PROFILE=scale (.ci/run)")
    for item in items:
        if "scale" in item.keywords:
            item.add_marker(skip)
