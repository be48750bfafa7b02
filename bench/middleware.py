"""What each of the site's middleware costs an API call that sends no cookie, in CPU.

    .venv/bin/python bench/middleware.py [--requests 5000] [--rounds 5]
        [--message-storage django.contrib.messages.storage.fallback.FallbackStorage]

The chain of ``MIDDLEWARE`` (less the tag route's, which answers before the view) is built the
way Django's handler builds it, around a view that answers ``{}``, one prefix at a time: each
middleware's figure is what adding it to the chain of those before it adds per request (so one
that needs another, auth after sessions, is measured where it stands). Requests are Django's
``RequestFactory`` POSTs of a bearer JSON call; the time is the thread's CPU time
(``time.thread_time``), the best of ``--rounds``. ``--message-storage`` measures the chain with
another ``MESSAGE_STORAGE`` (Django's default is the fallback storage: a signed cookie, then the
session).
"""

from __future__ import annotations

import argparse
import time

from _setup import django_setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--message-storage", help="another MESSAGE_STORAGE to measure with")
    args = parser.parse_args()
    django_setup()

    from django.conf import settings
    from django.core.handlers.exception import convert_exception_to_response
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.utils.module_loading import import_string

    if args.message_storage:
        settings.MESSAGE_STORAGE = args.message_storage
    factory = RequestFactory()

    def view(request):
        return HttpResponse(b"{}", content_type="application/json")

    def chain(paths: list[str]):
        handler = convert_exception_to_response(view)
        for path in reversed(paths):
            handler = convert_exception_to_response(import_string(path)(handler))
        return handler

    def cost(paths: list[str]) -> float:
        handler = chain(paths)
        best = float("inf")
        for _ in range(args.rounds):
            requests = [
                factory.post(
                    "/tagger/v1/artifacts",
                    b"{}",
                    content_type="application/json",
                    HTTP_AUTHORIZATION="Bearer x",
                    HTTP_HOST="127.0.0.1",
                )
                for _ in range(args.requests)
            ]
            start = time.thread_time()
            for request in requests:
                handler(request)
            best = min(best, (time.thread_time() - start) / args.requests * 1e6)
        return best

    paths = [p for p in settings.MIDDLEWARE if not p.endswith(".TagRouteMiddleware")]
    print(f"MESSAGE_STORAGE = {settings.MESSAGE_STORAGE}")
    previous = cost([])
    print(f"{'the view alone':58} {previous:6.1f} µs")
    for i, path in enumerate(paths):
        now = cost(paths[: i + 1])
        print(f"{path:58} {now - previous:+6.1f} µs")
        previous = now
    print(f"{'the whole chain':58} {previous - cost([]):+6.1f} µs")


if __name__ == "__main__":
    main()
