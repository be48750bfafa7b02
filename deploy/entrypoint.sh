#!/bin/sh
# The one way every process of agent-artifacts starts: the systemd units, the container image
# (Containerfile, compose.yaml) and bin/deploy-check all run these commands, so what the check
# proves is what production runs.
#   entrypoint.sh daphne [PORT]      one server process on DEPLOY_BIND:PORT (default 8000)
#   entrypoint.sh migrate            migrations, then static files (before the daphnes, and at upgrades)
#   entrypoint.sh deliver-webhooks   the webhook deliverer (where the feature exists)
#   entrypoint.sh prune              prune_artifacts $DEPLOY_PRUNE_ARGS
#   entrypoint.sh gc-blobs           gc_blobs --grace $DEPLOY_GC_GRACE
#   entrypoint.sh backup [DIR]       manage.py backup into DIR (default DEPLOY_BACKUP_DIR/<UTC time>)
#   entrypoint.sh manage ARGS…       any manage.py command
set -eu
ROOT="${DEPLOY_ROOT:-$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)}"
cd "$ROOT"
if [ -n "${DEPLOY_PYTHON:-}" ]; then
  PY="$DEPLOY_PYTHON"
elif [ -x "$ROOT/.venv/bin/python" ]; then
  PY="$ROOT/.venv/bin/python"
else
  PY=python3
fi
export DJANGO_SETTINGS_MODULE=agent_site.settings
# Metrics of every process of this host in one folder (prometheus_client's multiprocess mode):
# it must exist before any process (a command too) imports the metrics.
if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then mkdir -p "$PROMETHEUS_MULTIPROC_DIR"; fi
command="${1:-daphne}"
[ "$#" -gt 0 ] && shift
case "$command" in
  daphne)
    port="${1:-8000}"
    # No --proxy-headers: the server decides itself whom to believe (ARTIFACTS_TRUSTED_PROXIES).
    # --verbosity 0: no access line of daphne's own (Apache text with the query string); the site
    # writes its own (ARTIFACTS_ACCESS_LOG), and daphne's warnings and errors still reach stderr.
    exec "$PY" -m daphne --verbosity 0 -b "${DEPLOY_BIND:-127.0.0.1}" -p "$port" \
      agent_site.asgi:application
    ;;
  migrate)
    "$PY" manage.py migrate --noinput
    exec "$PY" manage.py collectstatic --noinput --verbosity 0
    ;;
  deliver-webhooks)
    if ! "$PY" manage.py help deliver_webhooks >/dev/null 2>&1; then
      echo "this version has no deliver_webhooks command: nothing to run" >&2
      exit 0
    fi
    exec "$PY" manage.py deliver_webhooks "$@"
    ;;
  prune)
    # shellcheck disable=SC2086 # the options are words
    exec "$PY" manage.py prune_artifacts ${DEPLOY_PRUNE_ARGS:-} "$@"
    ;;
  gc-blobs)
    exec "$PY" manage.py gc_blobs --grace "${DEPLOY_GC_GRACE:-1h}" "$@"
    ;;
  backup)
    dest="${1:-${DEPLOY_BACKUP_DIR:-/var/backups/artifacts}/$(date -u +%Y%m%dT%H%M%SZ)}"
    exec "$PY" manage.py backup "$dest"
    ;;
  manage)
    exec "$PY" manage.py "$@"
    ;;
  *)
    echo "entrypoint.sh: unknown command '$command' (daphne, migrate, deliver-webhooks, prune, gc-blobs, backup, manage)" >&2
    exit 2
    ;;
esac
