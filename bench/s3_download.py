"""Server memory per content download: S3 (moto) beside local storage, in one run
(docs/benchmarks.md, "Downloads from S3").

    .venv/bin/python bench/s3_download.py [--mib 256] [--clients 4]

Starts moto's S3 server on a free port and, one after the other, two daphnes on the same SQLite
database: one with blobs on local disk (the baseline), one with ``ARTIFACTS_STORAGE=s3`` against
moto. Each gets a blob of --mib MiB stored through ``PUT …/content``, is warmed with a one-byte
ranged GET (its S3 client, its first connection), and then serves the whole blob to one client and
to --clients clients at once. Reported: the server's RSS growth (peak while serving, sampled every
20 ms, minus the RSS before), the time, and that every client received the right sha256.
Goal: the S3 server grows by less than 64 MiB for 4 × 256 MiB.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers import DaphneServer, free_port, wait_for  # noqa: E402

PIECE = 1024 * 1024


def blob(size: int, digest: hashlib._Hash) -> Iterator[bytes]:
    seed = os.urandom(PIECE)
    for i in range(size // PIECE):
        piece = bytes([i % 251]) + seed[1:]
        digest.update(piece)
        yield piece


class PeakRSS:
    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.02)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def download(base_url: str, url: str, key: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    received = 0
    with httpx.Client(base_url=base_url, timeout=600) as client:
        with client.stream("GET", url, headers={"Authorization": f"Bearer {key}"}) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes(PIECE):
                digest.update(chunk)
                received += len(chunk)
    return received, digest.hexdigest()


def serve(name: str, env: dict[str, str], key: str, size: int, clients: int) -> dict:
    with (
        DaphneServer(env) as server,
        httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=600
        ) as client,
    ):
        record = client.post(
            "/bench-dl/v1/artifacts", json={"kind": "report", "key": name, "data": {}}
        ).json()
        url = f"/bench-dl/v1/artifacts/{record['id']}/content"
        digest = hashlib.sha256()
        put = client.put(
            url, content=blob(size, digest), headers={"Content-Type": "application/octet-stream"}
        )
        put.raise_for_status()
        sha = digest.hexdigest()
        assert client.get(url, headers={"Range": "bytes=0-0"}).status_code == 206  # warm
        result: dict = {"storage": name}
        for label, n in (("one", 1), (f"{clients} at once", clients)):
            pid = server.process.pid
            time.sleep(0.5)
            with PeakRSS(pid) as rss:
                baseline = rss.peak
                started = time.perf_counter()
                with ThreadPoolExecutor(n) as pool:
                    got = list(pool.map(lambda _: download(server.base_url, url, key), range(n)))
                took = time.perf_counter() - started
            assert all(r == (size, sha) for r in got), "a download did not match"
            result[label] = {
                "rss_growth_mib": round((rss.peak - baseline) / 2**20, 1),
                "seconds": round(took, 2),
                "mib_per_s": round(n * size / 2**20 / took, 1),
            }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    size = args.mib * PIECE

    data_dir = tempfile.mkdtemp(prefix="artifacts-bench-dl-")
    base_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ARTIFACTS_", "DATABASE_"))},
        "ARTIFACTS_DATA_DIR": data_dir,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "ARTIFACTS_MAX_CONTENT_BYTES": str(size + PIECE),
        "PYTHONPATH": str(ROOT),
    }
    base_env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=base_env, check=True)
    subprocess.run([*manage, "create_agent", "bench-dl"], env=base_env, check=True)
    key = (
        subprocess.run(
            [*manage, "create_agent_key", "bench-dl"],
            env=base_env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )

    port = free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        wait_for(lambda: httpx.get(endpoint).status_code < 500 if _up(port) else False, "moto")
        import boto3

        s3_env = {
            "ARTIFACTS_STORAGE": "s3",
            "ARTIFACTS_S3_BUCKET": "bench-dl",
            "ARTIFACTS_S3_ENDPOINT_URL": endpoint,
            "ARTIFACTS_S3_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket="bench-dl")
        results = [
            serve("local", base_env, key, size, args.clients),
            serve("s3", {**base_env, **s3_env}, key, size, args.clients),
        ]
    finally:
        moto.terminate()
        moto.wait(30)
    print(f"{args.mib} MiB blob; server RSS growth while serving (peak − before):")
    for result in results:
        parts = [
            f"{label}: +{v['rss_growth_mib']} MiB in {v['seconds']} s ({v['mib_per_s']} MiB/s)"
            for label, v in result.items()
            if label != "storage"
        ]
        print(f"  {result['storage']:>5}  " + "; ".join(parts))
    print(json.dumps(results))


def _up(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    main()
