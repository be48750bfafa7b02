"""One tagging process for tests/scale: ``python -m tests.scale._tagger <slug> <n> <count> <start_at>``."""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")


def main() -> None:
    import django

    django.setup()
    from artifacts_app import services

    slug, worker, count, start_at = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        float(sys.argv[4]),
    )
    time.sleep(max(0.0, start_at - time.time()))
    for i in range(count):
        key = "shared" if i % 2 == 0 else f"p{worker}-{i}"
        services.artifact_tag(agent=slug, kind="note", key=key, data={"worker": worker, "i": i})
    print("done", worker)


if __name__ == "__main__":
    main()
