"""The checks of bin/deploy-check, run against the stack it started: nginx (TLS) in front of two
daphnes on PostgreSQL, Redis and S3. One line per check; exit status 0 only when all pass.

Not a test of the suite: it needs the running stack, whose processes, ports and environment
bin/deploy-check passes in (the environment is the deployment's own, rendered from deploy/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = str(ROOT / "deploy" / "entrypoint.sh")
AGENT = "deploycheck"
MIB = 1024 * 1024

LIST_RECORDS = """
import json
from artifacts_app.models import Artifact
print(json.dumps({r.id: [r.key, r.data, r.blob_id] for r in Artifact.objects.order_by("id")}))
"""


class Stack:
    def __init__(self, args: argparse.Namespace) -> None:
        self.base = args.base.rstrip("/")
        self.daphnes = args.daphne
        self.pids = args.pid
        self.work = Path(args.work)
        self.admin_password = args.admin_password
        self.ca = args.ca
        self.http = httpx.Client(base_url=self.base, verify=args.ca, timeout=120)
        self.key = ""
        self.state: dict[str, Any] = {}

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [ENTRYPOINT, "manage", *args],
            env=env or os.environ.copy(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise AssertionError(f"manage.py {args[0]} failed: {done.stderr.strip()[-800:]}")
        return done.stdout

    def tag(self, key: str, **extra: Any) -> httpx.Response:
        body = {"key": key, "data": {"key": key}, **extra}
        return self.http.post(f"/{AGENT}/v1/artifacts", json=body, headers=self.auth)

    def records(self, env: dict[str, str]) -> dict[str, list[Any]]:
        out = self.manage("shell", "-c", LIST_RECORDS, env=env)
        return json.loads(out.strip().splitlines()[-1])


def check_health(s: Stack) -> str:
    r = s.http.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}, (r.status_code, r.text)
    token = os.environ["ARTIFACTS_HEALTH_TOKEN"]
    checks = s.http.get("/healthz", headers={"Authorization": f"Bearer {token}"}).json()["checks"]
    assert checks["database"] == {"status": "ok", "vendor": "postgresql"}, checks
    assert checks["storage"]["status"] == "ok" and checks["channelLayer"]["status"] == "ok", checks
    plain = httpx.get(
        s.base.replace("https://", "http://").replace(
            f":{os.environ['DEPLOY_HTTPS_PORT']}", f":{os.environ['DEPLOY_HTTP_PORT']}"
        )
        + "/healthz"
    )
    assert plain.status_code == 308 and plain.headers["location"].startswith("https://"), plain
    return "200 ok; database postgresql, storage, channel layer ok; http:// redirected to https://"


def check_proxy_headers(s: Stack) -> str:
    r = s.http.get("/healthz", headers={"X-Request-ID": "deploy-check-1"})
    assert r.headers.get("x-request-id") == "deploy-check-1", r.headers
    generated = s.http.get("/healthz").headers.get("x-request-id", "")
    assert re.fullmatch(r"[0-9a-f]{32}", generated), generated
    # nginx appends its peer to X-Forwarded-For; the daphnes trust nginx (ARTIFACTS_TRUSTED_PROXIES)
    # and so count failures per client: one address past the limit gets 429, another does not.
    limit = int(os.environ["ARTIFACTS_AUTH_FAILURE_LIMIT"])
    bad = {"Authorization": "Bearer not-a-token"}
    url = f"/{AGENT}/v1/artifacts"
    statuses = [
        s.http.get(url, headers={**bad, "X-Forwarded-For": "203.0.113.7"}).status_code
        for _ in range(limit + 1)
    ]
    assert statuses[:limit] == [401] * limit and statuses[-1] == 429, statuses
    other = s.http.get(url, headers={**bad, "X-Forwarded-For": "203.0.113.8"}).status_code
    assert other == 401, other
    return "X-Request-ID kept or made; X-Forwarded-For trusted: 429 for one client, 401 for another"


def check_admin_login(s: Stack) -> str:
    client = httpx.Client(base_url=s.base, verify=s.ca, timeout=30)
    page = client.get("/admin/login/")
    assert page.status_code == 200, page.status_code
    token = client.cookies["csrftoken"]
    r = client.post(
        "/admin/login/?next=/admin/",
        data={
            "username": "admin",
            "password": s.admin_password,
            "csrfmiddlewaretoken": token,
            "next": "/admin/",
        },
        headers={"Referer": f"{s.base}/admin/login/"},
    )
    assert r.status_code == 302 and r.headers["location"] == "/admin/", (
        r.status_code,
        r.text[:300],
    )
    assert "Secure" in r.headers.get("set-cookie", ""), r.headers.get("set-cookie")
    home = client.get("/admin/")
    assert home.status_code == 200 and 'id="user-tools"' in home.text, home.status_code
    return "302 to /admin/, secure session cookie, the admin index served"


def check_tag(s: Stack) -> str:
    r = s.tag("small", contents="hello from deploy-check", contentType="text/plain")
    assert r.status_code == 201, (r.status_code, r.text)
    record = r.json()
    got = s.http.get(f"/{AGENT}/v1/artifacts/{record['id']}/content", headers=s.auth)
    assert got.status_code == 200 and got.text == "hello from deploy-check", got.status_code
    s.state["small"] = record["id"]
    return f"201, {record['id']}, its contents read back"


def blocks(seed: int, count: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    for _ in range(count):
        yield rng.randbytes(MIB)


def check_large_upload(s: Stack) -> str:
    size_mib = 200
    expected = hashlib.sha256()
    for block in blocks(7, size_mib):
        expected.update(block)
    r = s.tag("large", data={"large": True})
    assert r.status_code == 201, r.text
    record_id = r.json()["id"]
    started = time.monotonic()
    put = s.http.put(
        f"/{AGENT}/v1/artifacts/{record_id}/content",
        content=blocks(7, size_mib),  # chunked, generated as it is sent: never whole in memory
        headers={**s.auth, "Content-Type": "application/octet-stream"},
    )
    took = time.monotonic() - started
    assert put.status_code == 200, (put.status_code, put.text[:300])
    content = put.json()["content"]
    assert content["size"] == size_mib * MIB and content["sha256"] == expected.hexdigest(), content
    s.state["large"] = (record_id, expected.hexdigest())
    return f"{size_mib} MiB chunked through nginx in {took:.1f} s ({size_mib / took:.0f} MiB/s)"


def check_download(s: Stack) -> str:
    record_id, sha = s.state["large"]
    digest = hashlib.sha256()
    started = time.monotonic()
    with s.http.stream("GET", f"/{AGENT}/v1/artifacts/{record_id}/content", headers=s.auth) as r:
        assert r.status_code == 200, r.status_code
        for chunk in r.iter_bytes():
            digest.update(chunk)
    took = time.monotonic() - started
    assert digest.hexdigest() == sha, "the downloaded bytes differ"
    return f"200 MiB in {took:.1f} s, sha256 equal"


def wait_for_event(ws: Any, key: str, timeout: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no event for {key} within {timeout} s"
        message = json.loads(ws.recv(timeout=left))
        if message.get("type") == "artifact.tagged" and message["record"].get("key") == key:
            return message


def check_websocket_nginx(s: Stack) -> str:
    context = ssl.create_default_context(cafile=s.ca)
    url = s.base.replace("https://", "wss://") + f"/{AGENT}/v1/events"
    with connect(url, additional_headers=s.auth, ssl=context, open_timeout=10) as ws:
        time.sleep(0.3)
        assert s.tag("ws-nginx").status_code == 201
        event = wait_for_event(ws, "ws-nginx")
    return f"wss:// upgraded by nginx; artifact.tagged seq {event['seq']} received"


def check_websocket_crossing(s: Stack) -> str:
    first, second = s.daphnes
    url = first.replace("http://", "ws://") + f"/{AGENT}/v1/events"
    with connect(url, additional_headers=s.auth, open_timeout=10) as ws:
        time.sleep(0.3)
        r = httpx.post(
            f"{second}/{AGENT}/v1/artifacts",
            json={"key": "ws-crossing", "data": {}},
            headers={**s.auth, "X-Forwarded-Proto": "https"},
            timeout=30,
        )
        assert r.status_code == 201, (r.status_code, r.text[:200])
        event = wait_for_event(ws, "ws-crossing")
    return f"subscribed on {first}, tagged on {second}: seq {event['seq']} crossed through Redis"


def check_metrics(s: Stack) -> str | None:
    r = s.http.get("/metrics")
    if r.status_code == 404:
        return None
    assert r.status_code in (200, 401, 403), r.status_code
    token = os.environ.get("ARTIFACTS_METRICS_TOKEN") or os.environ["ARTIFACTS_HEALTH_TOKEN"]
    if r.status_code != 200:
        r = s.http.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and "# TYPE" in r.text, (r.status_code, r.text[:200])
    names = sorted({line.split()[2] for line in r.text.splitlines() if line.startswith("# TYPE")})
    tags = sum(
        float(line.split()[-1])
        for line in r.text.splitlines()
        if line.startswith("artifacts_tags_total")
    )
    # Both daphnes tagged by now (through nginx, and on each directly): one scrape sums them.
    assert tags >= 4, f"artifacts_tags_total is {tags}"
    return f"{len(names)} metric families, the processes' totals in one scrape ({tags:.0f} tags)"


def check_webhook(s: Stack) -> str | None:
    probe = s.http.get(f"/{AGENT}/v1/webhooks", headers=s.auth)
    if probe.status_code == 404:
        return None
    from standardwebhooks.webhooks import Webhook

    received: list[tuple[bytes, dict[str, str]]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((body, {k.lower(): v for k, v in self.headers.items()}))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["DEPLOY_CHECK_HOOK_PORT"])), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        created = s.http.post(f"/{AGENT}/v1/webhooks", json={"url": url}, headers=s.auth)
        assert created.status_code == 201, (created.status_code, created.text[:300])
        secret = created.json()["secret"]
        started = time.monotonic()
        assert s.tag("webhooked").status_code == 201
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for body, headers in list(received):
                event = Webhook(secret).verify(body, headers)
                if event.get("record", {}).get("key") == "webhooked":
                    took = time.monotonic() - started
                    return (
                        f"delivered by the deliver-webhooks service in {took:.1f} s, "
                        "its Standard Webhooks signature verified"
                    )
            time.sleep(0.1)
        raise AssertionError(f"no delivery within 30 s ({len(received)} other requests)")
    finally:
        server.shutdown()
        server.server_close()


def tagger(s: Stack, prefix: str, stop: threading.Event, log: list[tuple[float, str, int]]) -> None:
    client = httpx.Client(base_url=s.base, verify=s.ca, timeout=30)
    i = 0
    while not stop.is_set():
        key = f"{prefix}-{i}"
        try:
            status = client.post(
                f"/{AGENT}/v1/artifacts", json={"key": key, "data": {"i": i}}, headers=s.auth
            ).status_code
        except httpx.HTTPError:
            status = 0
        log.append((time.monotonic(), key, status))
        i += 1


def listed_keys(s: Stack) -> set[str]:
    keys: set[str] = set()
    url: str | None = f"/{AGENT}/v1/artifacts?limit=500"
    while url:
        page = s.http.get(url, headers=s.auth).json()
        keys.update(r["key"] for r in page["results"])
        url = page["next"]
    return keys


def check_kill_one(s: Stack) -> str:
    stop = threading.Event()
    logs: list[list[tuple[float, str, int]]] = [[] for _ in range(4)]
    threads = [
        threading.Thread(target=tagger, args=(s, f"kill{n}", stop, logs[n])) for n in range(4)
    ]
    for t in threads:
        t.start()
    time.sleep(2)
    killed_at = time.monotonic()
    os.kill(s.pids[0], signal.SIGKILL)
    time.sleep(4)
    stop.set()
    for t in threads:
        t.join()
    log = [entry for part in logs for entry in part]
    acked = {key for _, key, status in log if 200 <= status < 300}
    failed = [(at, status) for at, _, status in log if not 200 <= status < 300]
    after = [status for at, _, status in log if at > killed_at + 1]
    lost = acked - listed_keys(s)
    assert not lost, f"{len(lost)} acknowledged tags are missing: {sorted(lost)[:5]}"
    assert after and all(200 <= st < 300 for st in after), f"the survivor failed: {after[-20:]}"
    s.http.get("/healthz").raise_for_status()
    return (
        f"{len(log)} tags, {len(acked)} acknowledged, none lost; {len(failed)} failed as the "
        f"process died; {len(after)} after it, all served by the survivor"
    )


def restored_env() -> dict[str, str]:
    env = os.environ.copy()
    env["DATABASE_URL"] = os.environ["DEPLOY_CHECK_RESTORE_DATABASE_URL"]
    env["ARTIFACTS_S3_BUCKET"] = os.environ["DEPLOY_CHECK_RESTORE_BUCKET"]
    env["ARTIFACTS_DATA_DIR"] = os.environ["DEPLOY_CHECK_RESTORE_DATA_DIR"]
    return env


def check_backup(s: Stack) -> str:
    stop = threading.Event()
    log: list[tuple[float, str, int]] = []
    thread = threading.Thread(target=tagger, args=(s, "backup", stop, log))
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    before = {key for at, key, st in log if 200 <= st < 300 and at < started}
    try:
        done = subprocess.run(
            [ENTRYPOINT, "backup", str(s.work / "backup")],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop.set()
        thread.join()
    assert done.returncode == 0, done.stderr[-800:]
    s.state["backup"] = (before, time.monotonic() - started)
    during = sum(1 for at, _, st in log if at >= started and 200 <= st < 300)
    return f"{done.stdout.strip()} ({during} tags committed during it)"


def check_restore(s: Stack) -> str:
    before, _ = s.state["backup"]
    env = restored_env()
    started = time.monotonic()
    out = s.manage("restore", str(s.work / "backup"), env=env)
    took = time.monotonic() - started
    restored = s.records(env)
    live = s.records(os.environ.copy())
    differ = [rid for rid, row in restored.items() if live.get(rid) != row]
    assert not differ, f"{len(differ)} restored records differ from the live ones: {differ[:3]}"
    keys = {row[0] for row in restored.values()}
    missing = before - keys
    assert not missing, f"tags acknowledged before the backup are missing: {sorted(missing)[:5]}"
    large_id, _ = s.state["large"]
    assert large_id in restored, "the 200 MiB record is not restored"
    verified = re.search(r"verified (\d+) blob\(s\), (\d+) bytes", out)
    assert verified, out
    return (
        f"{len(restored)} records equal to the live ones; {verified.group(1)} blobs, "
        f"{int(verified.group(2)) / MIB:.0f} MiB read back from the new bucket and hashed "
        f"({took:.1f} s)"
    )


CHECKS: list[tuple[str, Callable[[Stack], str | None]]] = [
    ("health through nginx", check_health),
    ("proxy headers", check_proxy_headers),
    ("admin login", check_admin_login),
    ("tag with contents", check_tag),
    ("large upload", check_large_upload),
    ("download", check_download),
    ("websocket through nginx", check_websocket_nginx),
    ("websocket across processes", check_websocket_crossing),
    ("webhook delivered", check_webhook),
    ("metrics", check_metrics),
    ("one daphne killed under load", check_kill_one),
    ("backup while tagging", check_backup),
    ("restore into a new database and bucket", check_restore),
]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--daphne", action="append", required=True)
    parser.add_argument("--pid", action="append", type=int, required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--admin-password", required=True)
    parser.add_argument("--agent-key", required=True)
    stack = Stack(parser.parse_args())
    stack.key = parser.parse_args().agent_key
    failures = 0
    for name, check in CHECKS:
        started = time.monotonic()
        try:
            detail = check(stack)
        except Exception as exc:
            failures += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
            if os.environ.get("DEPLOY_CHECK_VERBOSE"):
                traceback.print_exc()
            continue
        took = time.monotonic() - started
        if detail is None:
            print(f"skip {name}: not in this version", flush=True)
        else:
            print(f"ok   {name}: {detail} [{took:.1f} s]", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
