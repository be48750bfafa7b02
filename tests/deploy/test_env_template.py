"""deploy/artifacts.env lists every variable the settings read, with the settings' own default, and
deploy/render.py renders every template from it: neither can drift from agent_site/settings.py."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "agent_site" / "settings.py"
TEMPLATE = ROOT / "deploy" / "artifacts.env"
# env_int, env_bool, env_list and every other env_* reader settings.py defines (env_seconds, …).
READER_PREFIX = "env_"
# Read by libraries or the C library, not by settings.py, and documented in the file all the same.
OUTSIDE = {
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "MALLOC_ARENA_MAX",
    "PROMETHEUS_MULTIPROC_DIR",
}
# Set by the test runner for itself; never an operator's.
TEST_ONLY = {"PYTEST_XDIST_WORKER"}
LINE = re.compile(r"^#?([A-Z][A-Z0-9_]*)=(.*)$")


def settings_reads() -> dict[str, set[object]]:
    """Each variable settings.py reads, with the literal defaults it gives it (none if computed)."""
    reads: dict[str, set[object]] = {}
    for node in ast.walk(ast.parse(SETTINGS.read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        func = node.func
        name = first.value
        if isinstance(func, ast.Name) and func.id.startswith(READER_PREFIX):
            defaults = reads.setdefault(name, set())
            if len(node.args) > 1:
                try:
                    code = compile(ast.Expression(node.args[1]), "<default>", "eval")
                    defaults.add(eval(code, {"__builtins__": {}}))
                except Exception:
                    pass  # computed from another setting: the file says how
        elif isinstance(func, ast.Attribute) and func.attr == "get":
            target = func.value
            if isinstance(target, ast.Attribute) and target.attr == "environ":
                defaults = reads.setdefault(name, set())
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    defaults.add(node.args[1].value)
    return {name: d for name, d in reads.items() if name not in TEST_ONLY}


def template_lines() -> dict[str, str]:
    lines = {}
    for raw in TEMPLATE.read_text().splitlines():
        match = LINE.match(raw.strip())
        if match:
            assert match.group(1) not in lines, f"{match.group(1)} is listed twice"
            lines[match.group(1)] = match.group(2)
    return lines


def as_template_value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def test_every_setting_is_listed_and_nothing_else() -> None:
    reads = settings_reads()
    listed = {name for name in template_lines() if not name.startswith("DEPLOY_")}
    assert len(reads) > 40  # the parse found the settings, not an empty tree
    missing = sorted(set(reads) - listed)
    assert missing == [], f"settings.py reads these; add them to deploy/artifacts.env: {missing}"
    unknown = sorted(listed - set(reads) - OUTSIDE)
    assert unknown == [], f"deploy/artifacts.env lists what settings.py never reads: {unknown}"


def test_each_default_is_the_settings_own() -> None:
    reads = settings_reads()
    lines = template_lines()
    compared = 0
    for name, defaults in reads.items():
        if not defaults:
            continue
        written = lines[name]
        accepted = {as_template_value(d) for d in defaults}
        if written == "" and "" in accepted:
            continue
        assert written in accepted, (
            f"deploy/artifacts.env gives {name} the default {written!r}; settings.py: {accepted}"
        )
        compared += 1
    assert compared > 30


def test_every_variable_has_a_sentence() -> None:
    text = TEMPLATE.read_text().splitlines()
    for index, raw in enumerate(text):
        if LINE.match(raw.strip()):
            # A group of variables may share the comment above the group.
            above = index - 1
            while above >= 0 and LINE.match(text[above].strip()):
                above -= 1
            assert above >= 0 and text[above].startswith("# "), f"{raw!r} has no comment"


def test_render_fills_every_placeholder_and_follows_the_limits(tmp_path: Path) -> None:
    env = tmp_path / "site.env"
    env.write_text(
        "ARTIFACTS_MAX_CONTENT_BYTES=268435456\nARTIFACTS_BODY_IDLE_SECONDS=20\n"
        "ARTIFACTS_BODY_DEADLINE_SECONDS=120\nDEPLOY_DAPHNE_PORTS=9001 9002 9003\n"
    )
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "render.py"), "--env", str(env), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    site = (out / "nginx" / "artifacts.conf").read_text()
    assert "@" not in re.sub(r"\$\w+|'[^']*'", "", site).replace("@DEPLOY", "")
    # The site's bound, and the resumable uploads' (ARTIFACTS_MAX_UPLOAD_BYTES, as the server's).
    assert site.count(f"client_max_body_size {268435456 + 10485760 + 1048576};") == 1
    assert site.count(f"client_max_body_size {10 * 1024**3};") == 1
    assert "client_body_timeout 20s;" in site
    assert "proxy_read_timeout 180s;" in site  # the body deadline, then the storage's completion
    assert site.count("server 127.0.0.1:9003 max_fails=1 fail_timeout=5s;") == 3  # http, ws, mcp
    target = (out / "systemd" / "artifacts.target").read_text()
    assert "artifacts-daphne@9001.service artifacts-daphne@9002.service" in target
    for unit in (out / "systemd").iterdir():
        assert not re.search(r"@[A-Z_]+@", unit.read_text()), unit.name


def test_render_refuses_a_placeholder_without_a_value(tmp_path: Path) -> None:
    bad = subprocess.run(
        [
            sys.executable,
            str(ROOT / "deploy" / "render.py"),
            "--set",
            "ARTIFACTS_MAX_CONTENT_BYTES=lots",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0
    assert "ARTIFACTS_MAX_CONTENT_BYTES must be a whole number" in bad.stderr


def test_every_process_starts_through_the_entrypoint_with_known_settings() -> None:
    """The units, the image and the compose stack run deploy/entrypoint.sh (as bin/deploy-check
    does), and the compose stack sets only variables the environment file lists."""
    import yaml

    listed = set(template_lines())
    for unit in (ROOT / "deploy" / "systemd").glob("*.service.in"):
        starts = [line for line in unit.read_text().splitlines() if line.startswith("ExecStart=")]
        assert starts and all(
            line.startswith("ExecStart=@DEPLOY_ROOT@/deploy/entrypoint.sh ") for line in starts
        ), unit.name
    image = (ROOT / "deploy" / "Containerfile").read_text()
    assert 'ENTRYPOINT ["/srv/artifacts/deploy/entrypoint.sh"]' in image
    assert image.startswith("#") and "FROM python:3.11-slim" in image
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    app = compose["x-app"]
    assert set(app["environment"]) <= listed, set(app["environment"]) - listed
    for name in ("migrate", "daphne1", "daphne2", "deliver-webhooks"):
        assert compose["services"][name]["image"] == app["image"]
    # Every command of the entrypoint is run by a unit, and the long-running ones by compose too.
    entrypoint = (ROOT / "deploy" / "entrypoint.sh").read_text()
    units = " ".join(p.read_text() for p in (ROOT / "deploy" / "systemd").glob("*.service.in"))
    compose_commands = {
        s["command"][0] for s in compose["services"].values() if isinstance(s.get("command"), list)
    }
    for command in ("daphne", "migrate", "deliver-webhooks", "prune", "gc-blobs", "backup"):
        assert f"\n  {command})\n" in entrypoint, command
        assert f"entrypoint.sh {command}" in units, command
    assert {"daphne", "migrate", "deliver-webhooks"} <= compose_commands
