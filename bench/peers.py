"""The agent's road against what a user would pick instead, on this machine, in interleaved rounds.

    .venv/bin/python bench/peers.py [--rounds 5] [--requests 200] [--blob-mib 64] [--n 1000]

Peers: MLflow's tracking server with proxied artifacts (``mlflow server --serve-artifacts``,
SQLite backend store, artifacts on local disk, its default workers) and Google ADK's
``FileArtifactService``. They live in their own virtualenv, ``.venv-bench``, made on first use with
``pip install -e .[bench]`` (mlflow and google-adk pull in hundreds of packages whose pins need not
agree with the test venv's); their clients run there as worker processes, ours in ``.venv``.

Every round runs every case once, in the same order, so a slow spell of the shared machine hits
all of them; the table shows each case's median round and ratios of medians:

- tag over HTTP, sequential, one daphne (``POST artifacts`` with an agent key), beside a Django
  JSON hello (a sync view through the same handler and middleware on the same daphne), MLflow's
  ``log_text`` (its SDK call: one artifact PUT through the tracking server) and its raw artifact PUT;
- a ``--blob-mib`` upload: ours multipart ``POST artifacts`` and raw ``PUT …/content``, with the
  daphne process's peak-RSS growth (``/proc``), beside MLflow's ``log_artifact`` of the same file;
- tag in-process (the Python API, ``artifacts(slug).tag``) below the cap and at the cap (each tag
  evicts one), beside ADK's ``save_artifact`` and a raw ``sqlite3`` transaction of the same shape
  (counter row, upsert, evict past the cap, one event row; WAL, synchronous=NORMAL).
Also the load average before and after, since other work shares the machine, and the CPU steal.
The rounds begin once the machine is quiet (the servers' start-up done: ``wait_until_quiet``), and
each upload case, every side's, begins with the page cache written out (``flush_writes``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_VENV = ROOT / ".venv-bench"
MiB = 1024 * 1024
sys.path.insert(0, str(ROOT))

from tests.servers import DaphneServer, free_port  # noqa: E402

# --------------------------------------------------------------------------------------------
# Workers: one process per side, answering one JSON line per case.


def worker_main(kind: str) -> None:
    """``python bench/peers.py --worker ours|adk|mlflow``: run cases read from stdin."""
    handlers = {"ours": _OursWorker, "adk": _AdkWorker, "mlflow": _MlflowWorker}[kind]()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        value = getattr(handlers, request["case"])(**request.get("args", {}))
        print(json.dumps({"value": value}), flush=True)


class _OursWorker:
    """The Python API in-process, on its own SQLite data dir (DEBUG off), and raw sqlite3."""

    def __init__(self) -> None:
        from bench._setup import django_setup

        django_setup()
        from artifacts_app import services

        self.below = services.agent_create(slug="below", max_artifacts=10**9)
        self.cap = services.agent_create(slug="atcap", max_artifacts=500)
        self.seq = 0
        from artifacts_app import artifacts

        api = artifacts("atcap")
        for i in range(500):  # fill to the cap: every later tag of a new key evicts one
            api.tag(kind="note", key=f"fill-{i}", data={"i": i})
        import sqlite3

        self.raw_path = Path(os.environ["ARTIFACTS_DATA_DIR"]) / "raw.sqlite3"
        self.raw = sqlite3.connect(self.raw_path, isolation_level=None)
        self.raw.executescript(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
            "CREATE TABLE agent (id INTEGER PRIMARY KEY, count INTEGER, last_seq INTEGER);"
            "CREATE TABLE art (id TEXT PRIMARY KEY, agent INTEGER, key TEXT, data TEXT,"
            " updated_at REAL);"
            "CREATE INDEX art_agent_updated ON art (agent, updated_at, id);"
            "CREATE TABLE event (agent INTEGER, seq INTEGER, type TEXT, artifact TEXT,"
            " payload TEXT, PRIMARY KEY (agent, seq));"
            "INSERT INTO agent VALUES (1, 0, 0);"
        )

    def _tag(self, slug: str, n: int) -> float:
        from artifacts_app import artifacts

        api = artifacts(slug)
        start = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            api.tag(kind="note", key=f"k-{self.seq}", data={"n": self.seq, "text": "x" * 64})
        return n / (time.perf_counter() - start)

    def tag_below(self, n: int) -> float:
        return self._tag("below", n)

    def tag_at_cap(self, n: int) -> float:
        return self._tag("atcap", n)

    def raw_sqlite(self, n: int, cap: int = 10**9) -> float:
        db = self.raw
        start = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            db.execute("BEGIN IMMEDIATE")
            count, seq = db.execute("SELECT count, last_seq FROM agent WHERE id = 1").fetchone()
            inserted = db.execute(
                "INSERT INTO art VALUES (?, 1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "data = excluded.data, updated_at = excluded.updated_at",
                (f"a{self.seq}", f"k-{self.seq}", json.dumps({"n": self.seq}), time.time()),
            ).rowcount
            count += inserted
            if count > cap:
                db.execute(
                    "DELETE FROM art WHERE id IN (SELECT id FROM art WHERE agent = 1 "
                    "ORDER BY updated_at, id LIMIT ?)",
                    (count - cap,),
                )
                count = cap
            db.execute(
                "INSERT INTO event VALUES (1, ?, 'artifact.tagged', ?, ?)",
                (seq + 1, f"a{self.seq}", json.dumps({"id": f"a{self.seq}", "n": self.seq})),
            )
            db.execute("UPDATE agent SET count = ?, last_seq = ? WHERE id = 1", (count, seq + 1))
            db.execute("COMMIT")
        return n / (time.perf_counter() - start)


class _AdkWorker:
    def __init__(self) -> None:
        import asyncio
        import warnings

        warnings.filterwarnings("ignore")
        from google.adk.artifacts import FileArtifactService
        from google.genai import types

        self.loop = asyncio.new_event_loop()
        self.root = tempfile.mkdtemp(prefix="adk-bench-")
        self.service = FileArtifactService(root_dir=self.root)
        self.types = types
        self.seq = 0

    def save(self, n: int) -> float:
        async def run() -> float:
            start = time.perf_counter()
            for _ in range(n):
                self.seq += 1
                part = self.types.Part.from_text(text=json.dumps({"n": self.seq, "text": "x" * 64}))
                await self.service.save_artifact(
                    app_name="bench",
                    user_id="u",
                    session_id="s",
                    filename=f"k-{self.seq}.json",
                    artifact=part,
                )
            return n / (time.perf_counter() - start)

        return self.loop.run_until_complete(run())


class _MlflowWorker:
    def __init__(self) -> None:
        import warnings

        warnings.filterwarnings("ignore")
        import mlflow
        from mlflow import MlflowClient

        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
        self.client = MlflowClient()
        experiment = self.client.create_experiment(f"bench-{os.getpid()}-{time.time_ns()}")
        self.run_id = self.client.create_run(experiment).info.run_id
        self.seq = 0

    def log_text(self, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            self.client.log_text(self.run_id, json.dumps({"n": self.seq}), f"notes/{self.seq}.json")
        return n / (time.perf_counter() - start)

    def log_artifact(self, path: str) -> float:
        size = os.path.getsize(path)
        start = time.perf_counter()
        self.client.log_artifact(self.run_id, path, artifact_path=f"blobs/{time.time_ns()}")
        return size / (time.perf_counter() - start) / 1e6

    def artifact_url(self) -> str:
        run = self.client.get_run(self.run_id)
        return run.info.artifact_uri  # mlflow-artifacts:/<exp>/<run>/artifacts


class Worker:
    def __init__(self, python: Path, kind: str, env: dict[str, str], tree: Path = ROOT) -> None:
        self.process = subprocess.Popen(
            [str(python), str(tree / "bench" / "peers.py"), "--worker", kind],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self.process.stdout.readline()
        if not ready:
            raise SystemExit(f"bench/peers.py: the {kind} worker did not start")

    def __call__(self, case: str, **args: object) -> object:
        self.process.stdin.write(json.dumps({"case": case, "args": args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"bench/peers.py: a worker died during {case}")
        return json.loads(line)["value"]

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


# --------------------------------------------------------------------------------------------
# The driver.


def ensure_bench_venv() -> Path:
    python = BENCH_VENV / "bin" / "python"
    if not python.exists():
        print(
            "Creating .venv-bench with the [bench] extra (mlflow, google-adk, httpx) …", flush=True
        )
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[bench]"], check=True
        )
    return python


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak(pid: int) -> int:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass
    return peak_rss(pid)


def http_rate(client, method: str, url: str, n: int, **kwargs) -> tuple[float, float]:
    """(requests/s, p50 ms) of ``n`` sequential requests."""
    times = []
    start = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        body = kwargs.get("json")
        if callable(body):
            response = client.request(method, url, json=body(i))
        else:
            response = client.request(method, url(i) if callable(url) else url, **kwargs)
        if response.status_code >= 300:
            raise SystemExit(f"{method} {url}: {response.status_code} {response.text[:300]}")
        times.append(time.perf_counter() - t0)
    return n / (time.perf_counter() - start), statistics.median(times) * 1000


def flush_writes() -> None:
    """Before each upload case (every side's): write out what earlier cases left in the page cache.

    The kernel slows a process that writes while much is waiting to be written out: here a 64 MiB
    file write took 400–600 MB/s right after another 64 MiB write and ~5 GB/s after an
    ``os.sync()``. In the rounds, the upload that came after MLflow's ``log_artifact`` (64 MiB) or
    the tag cases' WAL writes paid for them (ours: 64 MiB multipart 286 vs 650 MB/s flushed)."""
    os.sync()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_fields() -> list[int]:
    """The machine's CPU ticks since boot by kind (/proc/stat's first line: user, nice, system,
    idle, iowait, irq, softirq, steal, …)."""
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def cpu_ticks() -> tuple[int, int]:
    """(all, steal) CPU ticks since boot. On a VM, a share of steal is time the host gave to
    other guests: the load average does not show it, and it slows every side of a run."""
    fields = _cpu_fields()
    return sum(fields[:8]), fields[7]


def busy_share(seconds: float) -> float:
    """The share of the CPUs busy over the next ``seconds`` (all but idle and iowait)."""

    def ticks() -> tuple[int, int]:
        fields = _cpu_fields()
        return sum(fields[:8]), fields[3] + fields[4]

    total0, idle0 = ticks()
    time.sleep(seconds)
    total1, idle1 = ticks()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


def wait_until_quiet(limit: float = 90.0) -> float:
    """Wait (at most ``limit`` s) until the machine is quiet: the servers' own start-up done.

    MLflow's ``/health`` answers while its job runner and seven huey consumers are still importing
    (more than one of this machine's two CPUs for ~15 s); rounds begun then measured that, mostly
    against whichever upload came first. Quiet: under 15% busy for two seconds running."""
    start = time.monotonic()
    quiet = 0
    while quiet < 2 and time.monotonic() - start < limit:
        quiet = quiet + 1 if busy_share(1.0) < 0.15 else 0
    return time.monotonic() - start


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[0] - before[0]
    return (after[1] - before[1]) / total if total else 0.0


GROUPS = ("http", "upload", "inproc")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[2])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--requests", type=int, default=200, help="sequential requests per HTTP case"
    )
    parser.add_argument("--blob-mib", type=int, default=64)
    parser.add_argument("--n", type=int, default=1000, help="tags per in-process case")
    parser.add_argument(
        "--cases",
        default=",".join(GROUPS),
        help="which measures, comma-separated: http (tag over HTTP, the hello, MLflow's "
        "log_text and raw PUT), upload, inproc (default: all)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="the source tree of an earlier commit (e.g. `git worktree add /tmp/before HEAD~1`): "
        "our cases are run from it too, in the same rounds, and printed as before → after",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args.worker)
    args.cases = {c.strip() for c in args.cases.split(",") if c.strip()}
    if not args.cases or args.cases - set(GROUPS):
        parser.error(f"--cases takes some of {', '.join(GROUPS)}")
    if args.before is not None and not (args.before / "bench" / "peers.py").is_file():
        parser.error(f"--before {args.before}: not a source tree of this project")

    import httpx

    bench_python = ensure_bench_venv()
    work = Path(tempfile.mkdtemp(prefix="peers-bench-"))
    started: list = []
    try:
        run(args, bench_python, work, started, httpx)
    finally:
        for thing in reversed(started):
            # DaphneServer stops, the workers and MLflow's server close.
            (thing.stop if hasattr(thing, "stop") else thing.close)()
        shutil.rmtree(work, ignore_errors=True)


class _Proc:
    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


class _Ours:
    """Our side, served from one source tree: a daphne (bench/rest_asgi.py, its own SQLite data
    dir) with an agent and its key, and the in-process worker (its own data dir)."""

    def __init__(self, tree: Path, work: Path, env: dict[str, str], args, started: list) -> None:
        work.mkdir()
        env = {**env, "ARTIFACTS_DATA_DIR": str(work / "http"), "PYTHONPATH": str(tree)}
        (work / "http").mkdir()
        manage = [sys.executable, str(tree / "manage.py")]
        subprocess.run([*manage, "migrate", "-v0"], cwd=tree, env=env, check=True)
        subprocess.run(
            [*manage, "create_agent", "tagger", "--max", str(10**9)],
            cwd=tree,
            env=env,
            check=True,
            capture_output=True,
        )
        self.key = (
            subprocess.run(
                [*manage, "create_agent_key", "tagger"],
                cwd=tree,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        self.daphne = DaphneServer(
            env,
            app="bench.rest_asgi:application",
            ready_path="/bare/hello",
            log_path=work / "daphne.log",
            timeout=60,
            cwd=tree,
        ).start()
        started.append(self.daphne)
        self.worker = None
        if "inproc" in args.cases:
            (work / "inproc").mkdir()
            inproc_env = {**env, "ARTIFACTS_DATA_DIR": str(work / "inproc")}
            self.worker = Worker(Path(sys.executable), "ours", inproc_env, tree)
            started.append(self.worker)


def run(args, bench_python: Path, work: Path, started: list, httpx) -> None:
    load_before = loadavg()
    ticks_before = cpu_ticks()
    base_env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env = {
        **base_env,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "ARTIFACTS_MAX_CONTENT_BYTES": str((args.blob_mib + 16) * MiB),
    }
    sides = {"": _Ours(ROOT, work / "ours", env, args, started)}
    if args.before is not None:
        sides["before_"] = _Ours(args.before.resolve(), work / "before", env, args, started)

    ml = adk = None
    if args.cases & {"http", "upload"}:
        ml = _start_mlflow(work, base_env, started, httpx)
    if "inproc" in args.cases:
        adk = Worker(bench_python, "adk", {**base_env, "PYTHONPATH": str(ROOT)})
        started.append(adk)

    blob = work / "blob.bin"
    with open(blob, "wb") as fh:
        for _ in range(args.blob_mib):
            fh.write(os.urandom(MiB))
    size = blob.stat().st_size
    seq = [0]

    def tag_body(i: int) -> dict:
        seq[0] += 1
        return {"kind": "note", "key": f"k-{seq[0]}", "data": {"n": seq[0], "text": "x" * 64}}

    cases: dict[str, object] = {}
    for prefix, ours in sides.items():
        cases.update(_our_cases(prefix, ours, args, blob, size, tag_body, httpx))
    if ml is not None:
        cases.update(_mlflow_cases(ml, args, blob, httpx))
    if adk is not None:
        adk("save", n=20)  # warm-up
        cases["adk_save"] = lambda: adk("save", n=args.n)
        cases["raw_sqlite"] = lambda: sides[""].worker("raw_sqlite", n=args.n, cap=500)

    print(
        f"quiet after {wait_until_quiet():.0f} s of waiting for the servers' start-up", flush=True
    )
    results: dict[str, list] = {}
    for r in range(args.rounds):
        for name, case in cases.items():
            results.setdefault(name, []).append(case())
        print(f"round {r + 1}/{args.rounds} done (load {loadavg()})", flush=True)
    load_after = loadavg()
    report(results, args, load_before, load_after, steal_share(ticks_before, cpu_ticks()))


def _start_mlflow(work: Path, base_env: dict[str, str], started: list, httpx) -> Worker:
    mlflow_dir = work / "mlflow"
    mlflow_dir.mkdir()
    mlflow_port = free_port()
    t0 = time.perf_counter()
    mlflow = subprocess.Popen(
        [
            str(BENCH_VENV / "bin" / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(mlflow_port),
            "--backend-store-uri",
            f"sqlite:///{mlflow_dir / 'mlflow.db'}",
            "--artifacts-destination",
            str(mlflow_dir / "artifacts"),
            "--serve-artifacts",
        ],
        cwd=mlflow_dir,
        env=base_env,
        stdout=open(work / "mlflow.log", "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    started.append(_Proc(mlflow))
    mlflow_url = f"http://127.0.0.1:{mlflow_port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(mlflow_url + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if mlflow.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(
                "MLflow's server did not start:\n" + (work / "mlflow.log").read_text()[-2000:]
            )
        time.sleep(0.5)
    print(f"MLflow server ready in {time.perf_counter() - t0:.1f} s", flush=True)
    ml = Worker(
        BENCH_VENV / "bin" / "python",
        "mlflow",
        {**base_env, "MLFLOW_TRACKING_URI": mlflow_url, "PYTHONPATH": str(ROOT)},
    )
    started.append(ml)
    ml.url = mlflow_url  # type: ignore[attr-defined]
    return ml


def _our_cases(prefix: str, ours: _Ours, args, blob: Path, size: int, tag_body, httpx) -> dict:
    daphne = ours.daphne
    client = httpx.Client(
        base_url=daphne.base_url, headers={"Authorization": f"Bearer {ours.key}"}, timeout=300
    )
    record = client.post("/tagger/v1/artifacts", json={"kind": "note", "key": "upload", "data": {}})
    upload_id = record.json()["id"]

    def upload(send) -> tuple[float, float]:
        flush_writes()
        before = reset_peak(daphne.process.pid)
        with open(blob, "rb") as fh:
            t0 = time.perf_counter()
            response = send(fh)
            elapsed = time.perf_counter() - t0
        assert response.status_code in (200, 201), response.text
        return size / elapsed / 1e6, (peak_rss(daphne.process.pid) - before) / MiB

    def multipart(fh):
        return client.post(
            "/tagger/v1/artifacts",
            files={
                "record": (None, b'{"kind": "note", "key": "upload", "data": {}}'),
                "contents": ("blob.bin", fh, "application/octet-stream"),
            },
        )

    def put(fh):
        return client.put(
            f"/tagger/v1/artifacts/{upload_id}/content",
            content=fh,
            headers={"Content-Type": "application/octet-stream"},
        )

    cases: dict = {}
    if "http" in args.cases:
        # Warm up every path once (imports, query plans).
        http_rate(client, "POST", "/tagger/v1/artifacts", 20, json=tag_body)
        http_rate(client, "GET", "/bare/django-hello", 20)
        cases[prefix + "tag_http"] = lambda: http_rate(
            client, "POST", "/tagger/v1/artifacts", args.requests, json=tag_body
        )
        cases[prefix + "hello_http"] = lambda: http_rate(
            client, "GET", "/bare/django-hello", args.requests
        )
    if "upload" in args.cases:
        cases[prefix + "ours_multipart"] = lambda: upload(multipart)
        cases[prefix + "ours_put"] = lambda: upload(put)
    if ours.worker is not None:
        worker = ours.worker
        worker("tag_below", n=50)
        worker("tag_at_cap", n=50)
        worker("raw_sqlite", n=50)
        cases[prefix + "inproc_below"] = lambda: worker("tag_below", n=args.n)
        cases[prefix + "inproc_at_cap"] = lambda: worker("tag_at_cap", n=args.n)
    return cases


def _mlflow_cases(ml: Worker, args, blob: Path, httpx) -> dict:
    raw = httpx.Client(timeout=300)
    artifact_uri = ml("artifact_url")
    raw_base = ml.url + "/api/2.0/mlflow-artifacts/artifacts/" + artifact_uri.split(":/", 1)[1]  # type: ignore[attr-defined]
    raw_seq = [0]

    def raw_url(i: int) -> str:
        raw_seq[0] += 1
        return f"{raw_base}/raw/{raw_seq[0]}.json"

    cases: dict = {}
    if "http" in args.cases:
        ml("log_text", n=5)
        http_rate(raw, "PUT", lambda i: f"{raw_base}/warm/{i}.json", 5, content=b"{}")
        cases["mlflow_log_text"] = lambda: ml("log_text", n=args.requests)
        cases["mlflow_raw_put"] = lambda: http_rate(
            raw, "PUT", raw_url, args.requests, content=b'{"n": 1}'
        )
    if "upload" in args.cases:
        cases["mlflow_log_artifact"] = lambda: flush_writes() or ml("log_artifact", path=str(blob))
    return cases


def _med(values: list, index: int | None = None) -> float:
    if index is not None:
        values = [v[index] for v in values]
    return statistics.median(values)


def _ok(flag: bool) -> str:
    return "✔" if flag else "✘"


def _rows(results: dict[str, list], args, p: str) -> list[tuple[str, ...]]:
    """The table's rows for one side of ours (``p``: "" or "before_"), where measured."""
    has = results.__contains__
    rows = []
    if has(p + "tag_http"):
        tag, tag_p50 = _med(results[p + "tag_http"], 0), _med(results[p + "tag_http"], 1)
        hello = _med(results[p + "hello_http"], 0)
        rows.append(
            (
                "POST a tag, sequential, one daphne",
                f"{tag:,.0f} req/s, p50 {tag_p50:.1f} ms",
                f"Django JSON hello, same daphne: {hello:,.0f} req/s",
                f"{tag / hello:.2f}×",
                f"≥ 0.67× {_ok(tag / hello >= 0.67)}",
            )
        )
        log_text = _med(results["mlflow_log_text"])
        raw_put = _med(results["mlflow_raw_put"], 0)
        rows.append(
            (
                "the same, against MLflow log_text / raw artifact PUT",
                f"{tag:,.0f} req/s",
                f"{log_text:,.0f} / {raw_put:,.0f} req/s",
                f"{tag / log_text:.2f}× / {tag / raw_put:.2f}×",
                f"≥ 4× {_ok(tag / log_text >= 4)}; ≥ 2× {_ok(tag / raw_put >= 2)}",
            )
        )
    if has(p + "ours_multipart"):
        log_artifact = _med(results["mlflow_log_artifact"])
        for case, what in (("ours_multipart", "multipart"), ("ours_put", "raw PUT …/content")):
            rate, rss = _med(results[p + case], 0), max(v[1] for v in results[p + case])
            rows.append(
                (
                    f"upload {args.blob_mib} MiB {what}",
                    f"{rate:,.0f} MB/s, server peak RSS +{rss:.1f} MiB",
                    f"MLflow log_artifact {log_artifact:,.0f} MB/s",
                    f"{rate / log_artifact:.2f}×",
                    f"≥ 1× {_ok(rate >= log_artifact)}, < 32 MiB {_ok(rss < 32)}",
                )
            )
    if has(p + "inproc_below"):
        below, at_cap = _med(results[p + "inproc_below"]), _med(results[p + "inproc_at_cap"])
        adk_rate, raw_rate = _med(results["adk_save"]), _med(results["raw_sqlite"])
        rows.append(
            (
                "tag in-process (Python API), below the cap",
                f"{below:,.0f} /s",
                f"ADK FileArtifactService {adk_rate:,.0f} /s; raw sqlite3 upsert+evict {raw_rate:,.0f} /s",
                f"{below / adk_rate:.2f}× ADK; {below / raw_rate:.2f}× raw",
                f"≥ 2.4× {_ok(below / adk_rate >= 2.4)}; ≥ 0.2× {_ok(below / raw_rate >= 0.2)}",
            )
        )
        rows.append(
            (
                "tag at the cap vs below",
                f"{at_cap:,.0f} /s",
                f"below {below:,.0f} /s",
                f"{below / at_cap:.2f}× slower",
                f"≤ 1.2× {_ok(below / at_cap <= 1.2)}",
            )
        )
    return rows


def report(results: dict[str, list], args, load_before: str, load_after: str, steal: float) -> None:
    print()
    print(
        f"bench/peers.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{args.rounds} rounds, medians; load average {load_before} before, {load_after} after; "
        f"CPU steal {steal:.1%} of the run"
    )
    sides = [("", "")] + ([("before_", f" (before: {args.before})")] if args.before else [])
    for prefix, title in sides:
        print()
        if title:
            print(f"Before{title}, same rounds:")
            print()
        print("| measure | ours | peer / floor | ratio | goal |")
        print("|---|---|---|---|---|")
        for row in _rows(results, args, prefix):
            print("| " + " | ".join(row) + " |")
    print()
    print("per round:", json.dumps({k: v for k, v in results.items()}, default=str))


if __name__ == "__main__":
    main()
