"""django-storages' S3Storage with one botocore data loader per process.

S3Storage gives each thread a boto3 session of its own (sessions are not thread-safe), and each
new botocore session loads botocore's JSON models again (``endpoints.json``, S3's
``service-2.json``, …) into a cache of its own: measured here, ~130 ms of CPU and **~12.6 MiB of
RSS per thread** that touches the storage (eight threads: +106 MiB). The request threads live as
long as the process (issue 11), so a daphne whose forty threads had each stored or served a blob
would hold ~500 MiB of copies of the same JSON (computed, 40 × 12.6 MiB). Here every session this
storage makes is given the process's one loader (its cache of parsed models): a thread's first S3
call costs ~20 ms and ~0.5 MiB. The sessions, clients and resources stay per thread, as before;
only the read-only parsed models are shared — as a botocore maintainer suggested in
boto/botocore#3078 and Airflow does (apache/airflow#40658).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import boto3
import botocore.session
from botocore.loaders import Loader
from storages.backends.s3 import S3Storage as _S3Storage

_loader: Loader | None = None
# Guards the loader's making and the process's first connection, which makes it (re-entrant).
_lock = threading.RLock()
_parsed = False  # the first connection is made: the models are in the loader's cache


class _SearchPaths(list):
    """A loader's search paths, each once: boto3 appends its own data folder to the loader of
    every session it makes, so a shared loader's list would grow by one per thread."""

    def append(self, path: Any) -> None:
        if path not in self:
            super().append(path)


def shared_loader(core: botocore.session.Session) -> Loader:
    """The process's loader, made on first use with the search paths botocore would have used
    (``AWS_DATA_PATH``, as ``botocore.loaders.create_loader`` reads it)."""
    global _loader
    with _lock:
        if _loader is None:
            data_path = core.get_config_variable("data_path")
            paths = _SearchPaths(
                os.path.expanduser(os.path.expandvars(path))
                for path in (data_path.split(os.pathsep) if data_path else [])
            )
            _loader = Loader(extra_search_paths=paths)
        return _loader


class S3Storage(_S3Storage):
    """S3Storage whose per-thread sessions share the process's parsed botocore models."""

    @property
    def connection(self) -> Any:
        """This thread's resource (as S3Storage's). The process's first is made under a lock:
        the loader's cache does not lock, so threads whose first call overlapped the first
        parse (~130 ms) would each parse, and keep, a copy of their own."""
        global _parsed
        if not _parsed:
            with _lock:
                resource = super().connection
                _parsed = True
                return resource
        return super().connection

    def _create_session(self) -> boto3.Session:
        core = botocore.session.get_session()
        core.register_component("data_loader", shared_loader(core))
        if self.session_profile:
            return boto3.Session(profile_name=self.session_profile, botocore_session=core)
        return boto3.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            aws_session_token=self.security_token,
            botocore_session=core,
        )
