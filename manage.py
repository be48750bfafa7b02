#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting from the environment is wrong (agent_site/settings.py says which, in a
        # sentence): say so, without a traceback.
        sys.exit(f"manage.py: the settings are not usable: {exc}")


if __name__ == "__main__":
    main()
