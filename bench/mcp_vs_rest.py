"""MCP beside REST on one real daphne, in interleaved rounds of the same run.

    .venv/bin/python bench/mcp_vs_rest.py [--requests 300] [--rounds 3]

- read: requests/s of resources/read of one record (artifact://reviewer/<id>, a 1 KiB text content
  inline) beside REST's GET artifacts/<id> plus GET artifacts/<id>/content (what REST needs for the
  same answer), and beside GET artifacts/<id> alone;
- tool: requests/s of tools/call tag_artifact beside REST's POST tools/tag_artifact.
MCP is measured with the official SDK client, on both wires it speaks: a 2025 session
(initialize, then POSTs answered on SSE) and the 2026 single exchange (no session). REST uses
httpx's async client with keep-alive. Sequential requests, one client, both in this process.
Target: MCP within 2x of REST (ratios printed). SQLite in a temporary data dir, DEBUG off.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, this file's folder comes first on sys.path and its name would hide the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
TOOL_INPUT = {"artifact": {"kind": "report", "key": "bench-tool", "title": None, "data": "r"}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(env: dict[str, str]) -> dict[str, str]:
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from artifacts_app import services

    _, key = services.agent_key_create(agent="reviewer")
    for i in range(200):
        services.artifact_tag(agent="reviewer", kind="report", key=f"r{i}", data={"i": i})
    record = services.artifact_tag(
        agent="reviewer",
        kind="report",
        key="read-me",
        title="Read me",
        data={"summary": "a record with a small text content"},
        contents="x" * 1024,
        content_type="text/markdown",
    ).record
    return {"key": key, "id": record.id}


async def rate(make_call, requests: int) -> float:
    await make_call()  # warm
    start = time.perf_counter()
    for _ in range(requests):
        await make_call()
    return requests / (time.perf_counter() - start)


async def run(base: str, key: str, record_id: str, requests: int, rounds: int) -> None:
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    auth = {"Authorization": f"Bearer {key}"}
    uri = f"artifact://reviewer/{record_id}"
    results: dict[str, list[float]] = {}
    async with (
        httpx.AsyncClient(base_url=base, headers=auth, timeout=30) as http,
        httpx2.AsyncClient(headers=auth, timeout=30) as h1,
        httpx2.AsyncClient(headers=auth, timeout=30) as h2,
    ):
        legacy = Client(
            streamable_http_client(f"{base}/reviewer/mcp", http_client=h1), mode="legacy"
        )
        modern = Client(streamable_http_client(f"{base}/reviewer/mcp", http_client=h2), mode="auto")
        async with legacy, modern:
            assert modern.protocol_version == "2026-07-28"

            async def rest_read() -> None:
                (await http.get(f"/reviewer/v1/artifacts/{record_id}")).raise_for_status()
                (await http.get(f"/reviewer/v1/artifacts/{record_id}/content")).raise_for_status()

            async def rest_record() -> None:
                (await http.get(f"/reviewer/v1/artifacts/{record_id}")).raise_for_status()

            async def rest_tool() -> None:
                answer = await http.post(
                    "/reviewer/v1/tools/tag_artifact", json={"input": TOOL_INPUT}
                )
                answer.raise_for_status()

            def raw(method: str, params: dict, name: str):
                # The 2026 wire by hand (httpx, no SDK client): the server's cost alone.
                meta = {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": method,
                    "params": {**params, "_meta": meta},
                }
                headers = {
                    "Accept": "application/json, text/event-stream",
                    "Mcp-Protocol-Version": "2026-07-28",
                    "Mcp-Method": method,
                    "Mcp-Name": name,
                }

                async def call() -> None:
                    answer = await http.post("/reviewer/mcp", json=body, headers=headers)
                    assert answer.status_code == 200 and '"result"' in answer.text, answer.text

                return call

            def mcp_read(client):
                async def call() -> None:
                    got = await client.read_resource(uri, cache_mode="bypass")
                    assert len(got.contents) == 2

                return call

            def mcp_tool(client):
                async def call() -> None:
                    assert not (await client.call_tool("tag_artifact", TOOL_INPUT)).is_error

                return call

            measures = {
                "REST GET record + content": rest_read,
                "REST GET record": rest_record,
                "MCP resources/read (2025 session)": mcp_read(legacy),
                "MCP resources/read (2026 wire)": mcp_read(modern),
                "MCP resources/read (2026 wire, raw httpx)": raw(
                    "resources/read", {"uri": uri}, uri
                ),
                "REST POST tools/tag_artifact": rest_tool,
                "MCP tools/call tag_artifact (2025 session)": mcp_tool(legacy),
                "MCP tools/call tag_artifact (2026 wire)": mcp_tool(modern),
                "MCP tools/call tag_artifact (2026 wire, raw httpx)": raw(
                    "tools/call", {"name": "tag_artifact", "arguments": TOOL_INPUT}, "tag_artifact"
                ),
            }
            for _ in range(rounds):
                for name, call in measures.items():
                    results.setdefault(name, []).append(await rate(call, requests))

    med = {name: statistics.median(values) for name, values in results.items()}
    print(f"load average: {os.getloadavg()}")
    print(f"{requests} sequential requests x {rounds} interleaved rounds; median req/s")
    for name, value in med.items():
        print(f"  {name:45s} {value:8.1f} req/s")
    base_read, base_tool = med["REST GET record + content"], med["REST POST tools/tag_artifact"]
    print("ratios (MCP / REST; target >= 0.5):")
    for wire in ("2025 session", "2026 wire", "2026 wire, raw httpx"):
        read = med[f"MCP resources/read ({wire})"]
        tool = med[f"MCP tools/call tag_artifact ({wire})"]
        print(
            f"  read {wire}: {read / base_read:.2f}x of record+content, "
            f"{read / med['REST GET record']:.2f}x of record alone; tool {wire}: {tool / base_tool:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="bench-mcp-")
    env = {
        "ARTIFACTS_DATA_DIR": data_dir,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + "k" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
    }
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    ids = prepare(env)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "agent_site.asgi:application",
        ],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("daphne did not start") from None
                time.sleep(0.1)
        asyncio.run(
            run(f"http://127.0.0.1:{port}", ids["key"], ids["id"], args.requests, args.rounds)
        )
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
