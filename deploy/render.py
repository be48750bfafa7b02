#!/usr/bin/env python3
"""Render deploy/'s templates (nginx site, systemd units) from the environment file.

    python3 deploy/render.py --env /etc/artifacts/artifacts.env --out /tmp/rendered [--set NAME=VALUE]

Each ``@NAME@`` in a ``*.in`` template is replaced by the variable NAME: its default from
deploy/artifacts.env (the ``#NAME=value`` lines), overridden by the ``NAME=value`` lines of each
``--env`` file, then (``--environ``) by the process's environment, then by ``--set``; or by a value computed from them (``derived`` below), so that
nginx's limits and timeouts follow the server's own. A placeholder with no value stops the
render with its name. Standard library only: it runs before the project is installed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE_ENV = HERE / "artifacts.env"
LINE = re.compile(r"^(#?)([A-Z][A-Z0-9_]*)=(.*)$")
PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")
MIB = 1024 * 1024


def read_env(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(defaults, set values) of an environment file: ``#NAME=v`` lines and ``NAME=v`` lines."""
    defaults: dict[str, str] = {}
    values: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        match = LINE.match(raw.strip())
        if not match:
            continue
        commented, name, value = match.groups()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        (defaults if commented else values)[name] = value
    return defaults, values


def derived(env: dict[str, str]) -> dict[str, str]:
    """Values computed from the settings, so nginx and the server never disagree."""

    def number(name: str) -> int:
        try:
            return int(env[name])
        except (KeyError, ValueError):
            raise SystemExit(
                f"render: {name} must be a whole number; got {env.get(name)!r}"
            ) from None

    ports = env.get("DEPLOY_DAPHNE_PORTS", "").split()
    upstreams = env.get("DEPLOY_UPSTREAMS", "").split() or [
        f"{env.get('DEPLOY_BIND', '127.0.0.1')}:{port}" for port in ports
    ]
    if not upstreams:
        raise SystemExit("render: DEPLOY_DAPHNE_PORTS (or DEPLOY_UPSTREAMS) names no daphne")
    https = env.get("DEPLOY_HTTPS_PORT", "443")
    s3_wait = number("ARTIFACTS_S3_MAX_ATTEMPTS") * number("ARTIFACTS_S3_READ_TIMEOUT")
    client_wait = int(
        env.get("DATABASE_CLIENT_TIMEOUT") or number("DATABASE_STATEMENT_TIMEOUT") + 5
    )
    # The server's own bound on any body (agent_site/server.py): content + JSON + 1 MiB.
    body = number("ARTIFACTS_MAX_CONTENT_BYTES") + number("ARTIFACTS_MAX_JSON_BODY_BYTES") + MIB
    # Resumable uploads' PATCH and POST (tus): up to the upload limit, the server's bound there.
    uploads = number("ARTIFACTS_MAX_UPLOAD_BYTES")
    return {
        "CLIENT_MAX_BODY_SIZE": str(body),
        "UPLOADS_MAX_BODY_SIZE": str(max(body, uploads)),
        # Longer than any wait of the server for a dependency, so that the server answers 503
        # itself: PostgreSQL's client timeout, S3's attempts × read timeout; at least nginx's 60 s.
        "PROXY_READ_TIMEOUT": str(max(60, client_wait + 10, s3_wait + 10)),
        # An upload's answer comes once its body is in (at most the body deadline) and stored.
        "UPLOAD_READ_TIMEOUT": str(
            number("ARTIFACTS_BODY_DEADLINE_SECONDS") + max(60, s3_wait + 10)
        ),
        "UPSTREAM_SERVERS": "\n".join(
            f"    server {hostport} max_fails=1 fail_timeout=5s;" for hostport in upstreams
        ),
        "HTTPS_PORT_SUFFIX": "" if https == "443" else f":{https}",
        "DAPHNE_UNITS": " ".join(f"artifacts-daphne@{port}.service" for port in ports),
    }


def render(text: str, env: dict[str, str], source: Path) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise SystemExit(f"render: {source.name} uses @{name}@, which has no value")
        return env[name]

    return PLACEHOLDER.sub(value, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", default=[], type=Path, help="environment file")
    parser.add_argument(
        "--environ",
        action="store_true",
        help="also take this process's environment variables of the names artifacts.env lists",
    )
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", required=True, type=Path, help="folder for the rendered files")
    args = parser.parse_args(argv)

    env, _ = read_env(TEMPLATE_ENV)
    for path in args.env:
        _, values = read_env(path)
        env.update(values)
    if args.environ:
        env.update({name: os.environ[name] for name in list(env) if name in os.environ})
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"render: --set takes NAME=VALUE; got {item!r}")
        env[name] = value
    env.update(derived(env))

    written = []
    for template in sorted(HERE.rglob("*.in")):
        relative = template.relative_to(HERE).with_suffix("")
        target = args.out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(template.read_text(encoding="utf-8"), env, template), "utf-8")
        written.append(str(target))
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
