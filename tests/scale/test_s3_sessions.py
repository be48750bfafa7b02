"""The S3 storage's per-thread sessions share one parsed copy of botocore's models
(agent_site/s3.py): a thread's first S3 call no longer loads ~12.6 MiB of JSON of its own."""

from __future__ import annotations

import gc
import threading

import psutil
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

THREADS = 8


@pytest.mark.scale
def test_each_thread_has_its_own_session_and_all_share_one_loader():
    from agent_site import s3

    storage = storages["artifacts"]
    assert isinstance(storage, s3.S3Storage)
    assert (
        storage.connection is not None
    )  # this thread's: the models are loaded before the baseline
    gc.collect()
    process = psutil.Process()
    baseline = process.memory_info().rss
    connections: dict[int, object] = {}
    errors: list[BaseException] = []

    def store(i: int) -> None:
        try:
            name = storage.save(f"threads/{i}", ContentFile(b"x" * (i + 1)))
            with storage.open(name) as fh:  # a real round trip to the S3 server (moto here)
                assert fh.read() == b"x" * (i + 1)
            # save/open went through the storage's cached bucket; this is the thread's own.
            connections[i] = storage.connection
            assert storage.exists(name)  # a call on it
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=store, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(connections) == THREADS
    gc.collect()
    grown = process.memory_info().rss - baseline

    # Sessions stay per thread (boto3's are not thread-safe); the parsed models are shared.
    assert len({id(c) for c in connections.values()}) == THREADS
    assert len({id(c.meta.client._loader) for c in connections.values()}) == 1
    assert all(c.meta.client._loader is s3._loader for c in connections.values())
    # boto3 adds its data folder to each session's loader: once on the shared one, not per thread.
    paths = s3._loader.search_paths
    assert len(paths) == len(set(paths))
    # A session per thread with its own models grew RSS by ~12.6 MiB each (~100 MiB for eight).
    assert grown < THREADS * 3 * 2**20, (
        f"{THREADS} threads' sessions grew RSS by {grown / 2**20:.1f} MiB"
    )


@pytest.mark.scale
def test_threads_whose_first_calls_overlap_parse_the_models_once(monkeypatch):
    """The loader's cache does not lock: the process's first connection is made under a lock, so
    threads starting together wait for one parse instead of each keeping a copy of their own."""
    from agent_site import s3

    monkeypatch.setattr(s3, "_loader", None)  # as a new process: nothing parsed yet
    monkeypatch.setattr(s3, "_parsed", False)
    storage = storages["artifacts"]
    start = threading.Barrier(THREADS)
    models: list[object] = []

    def connect() -> None:
        start.wait(30)
        models.append(storage.connection.meta.client.meta.service_model._service_description)

    threads = [threading.Thread(target=connect) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(models) == THREADS
    assert len({id(model) for model in models}) == 1
