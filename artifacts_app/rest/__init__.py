"""The REST API under ``/<slug>/v1/`` (API.md "HTTP routes"): thin DRF views over the services."""

from __future__ import annotations
