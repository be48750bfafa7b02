"""The log lines (docs/operations.md "Logs"): the request id's rule, the JSON line's fields and
what it leaves out, and the settings that choose the format. Servers writing them:
``test_served``."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys

import pytest
from django.test import Client, RequestFactory

from artifacts_app import logs
from tests.servers import ROOT
from tests.settings.test_profiles import SCALE_VARS, settings_with


@pytest.mark.parametrize(
    "given",
    ["0f8fad5b-d9cb-469f-a165-70867728950e", "01HZX3", "a" * 128, "lb:7.1/req+=_-x"],
)
def test_a_plain_short_request_id_is_kept(given):
    assert logs.request_id(given) == given


@pytest.mark.parametrize(
    "given",
    [None, "", "a" * 129, "two words", 'quo"te', "new\nline", "tab\t", "ünïcode", "{json}"],
)
def test_any_other_request_id_is_replaced_by_a_new_one(given):
    made = logs.request_id(given)
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    assert made != logs.request_id(given)


def _formatted(record: logging.LogRecord) -> dict:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    handler.addFilter(logs.RequestIdFilter())
    handler.handle(record)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


def test_a_json_line_leaves_out_the_request_it_was_logged_with():
    request = RequestFactory().get("/reviewer/v1/artifacts?token=sekrit-in-query")
    request.request_id = "rid-1"
    record = logging.LogRecord(
        "django.request", logging.WARNING, __file__, 1, "Not Found: %s", (request.path,), None
    )
    record.request = request
    record.status_code = 404
    line = _formatted(record)
    assert line["message"] == "Not Found: /reviewer/v1/artifacts"
    assert line["level"] == "WARNING" and line["logger"] == "django.request"
    assert line["request_id"] == "rid-1" and line["status_code"] == 404 and line["time"]
    assert "request" not in line
    assert "sekrit" not in json.dumps(line)


def test_lines_logged_while_a_request_runs_carry_its_id():
    token = logs.REQUEST_ID.set("rid-2")
    try:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), None)
        assert _formatted(record)["request_id"] == "rid-2"
    finally:
        logs.REQUEST_ID.reset(token)
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "outside", (), None)
    assert "request_id" not in _formatted(record)


def test_the_access_line_of_a_request(db, caplog):
    with caplog.at_level(logging.INFO, logger="artifacts.access"):
        response = Client().get("/healthz?token=sekrit", HTTP_X_REQUEST_ID="probe-7")
    assert response["X-Request-ID"] == "probe-7"
    (record,) = [r for r in caplog.records if r.name == "artifacts.access"]
    assert record.request_id == "probe-7" and record.route == "healthz"
    assert record.status == 200 and record.caller == "anonymous" and record.agent is None
    assert record.path == "/healthz" and record.method == "GET"
    assert "sekrit" not in record.getMessage()


def test_access_lines_can_be_turned_off(db, caplog, settings):
    settings.ARTIFACTS_ACCESS_LOG = False
    with caplog.at_level(logging.INFO, logger="artifacts.access"):
        response = Client().get("/healthz")
    assert response["X-Request-ID"]
    assert not [r for r in caplog.records if r.name == "artifacts.access"]


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"ARTIFACTS_LOG_FORMAT": "xml"}, "ARTIFACTS_LOG_FORMAT is 'plain' or 'json'"),
        ({"ARTIFACTS_METRICS_TOKEN": "short"}, "32+ random characters"),
        ({"ARTIFACTS_ACCESS_LOG": "maybe"}, "ARTIFACTS_ACCESS_LOG must be one of"),
        ({"PROMETHEUS_MULTIPROC_DIR": "/nonexistent/metrics"}, "not a writable directory"),
    ],
)
def test_bad_log_and_metrics_settings_stop_at_start_with_a_sentence(env, fragment):
    proc = settings_with(**env)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and fragment in proc.stderr


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DJANGO_DEBUG": "1"}, "plain"),
        ({"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "k" * 40}, "json"),
        ({"DJANGO_DEBUG": "1", "ARTIFACTS_LOG_FORMAT": "json"}, "json"),
        (
            {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "k" * 40, "ARTIFACTS_LOG_FORMAT": "plain"},
            "plain",
        ),
    ],
)
def test_the_log_format_follows_debug_unless_chosen(env, expected):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, logging; django.setup(); from django.conf import settings;"
            " logging.getLogger('probe').warning('hello');"
            " print(settings.ARTIFACTS_LOG_FORMAT)",
        ],
        cwd=ROOT,
        env={**settings_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
    line = done.stderr.strip().splitlines()[-1]
    if expected == "json":
        assert json.loads(line)["message"] == "hello"
    else:
        assert line.endswith("WARNING probe [-] hello")


def settings_env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k not in SCALE_VARS},
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
    }


def test_new_request_ids_differ_in_a_forked_process():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its id, then gone
        os.write(write, logs.request_id(None).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    os.close(write)
    mine = logs.request_id(None)
    assert re.fullmatch(r"[0-9a-f]{32}", child)
    assert child[:16] != mine[:16]
