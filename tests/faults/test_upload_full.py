"""A disk that fills mid-upload (a real tmpfs): the PATCH answers 507 ``storage_full`` and the
upload keeps every byte it stored before, so once there is room again it goes on from the offset
the server reports (API.md "Large contents")."""

from __future__ import annotations

import hashlib
import os
import subprocess

import orjson

from artifacts_app import services
from tests.rest.conftest import bearer

MIB = 1024 * 1024
TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}
OCTETS = "application/offset+octet-stream"


def test_a_full_disk_mid_upload_answers_507_and_keeps_the_offset(
    client, reviewer, settings, small_disk
):
    storages = {name: dict(conf) for name, conf in settings.STORAGES.items()}
    storages["artifacts"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": small_disk / "blobs"},
    }
    settings.STORAGES = storages
    key = services.agent_key_create(agent=reviewer)[1]
    data = os.urandom(6 * MIB)  # the disk holds 4 MiB
    made = client.post(
        "/reviewer/v1/uploads",
        b"",
        content_type=OCTETS,
        **TUS,
        **bearer(key),
        HTTP_UPLOAD_LENGTH=str(len(data)),
    )
    url = made["Location"].split("testserver", 1)[-1]

    def patch(offset: int):
        return client.patch(
            url, data[offset:], content_type=OCTETS, **TUS, **bearer(key),
            HTTP_UPLOAD_OFFSET=str(offset),
        )  # fmt: skip

    refused = patch(0)
    assert refused.status_code == 507, refused.content
    assert orjson.loads(refused.content)["error"]["code"] == "storage_full"
    kept = int(client.head(url, **TUS, **bearer(key))["Upload-Offset"])
    assert MIB <= kept <= 4 * MIB  # what was stored before the disk filled
    # Room again (the tmpfs grown as an operator would free space): on from the offset.
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True, timeout=10)
    assert patch(kept).status_code == 204
    tagged = client.post(
        "/reviewer/v1/artifacts",
        orjson.dumps({"kind": "report", "data": {"x": 1}, "upload": url.rsplit("/", 1)[1]}),
        "application/json",
        **bearer(key),
    )
    assert tagged.status_code == 201, tagged.content
    assert orjson.loads(tagged.content)["content"]["sha256"] == hashlib.sha256(data).hexdigest()
