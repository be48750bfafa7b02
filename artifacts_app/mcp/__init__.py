"""Every agent an MCP server at ``/<slug>/mcp`` (API.md "MCP"), an entry point beside ``rest`` and
``consumers``: ``mount`` (our door: path, Host, agent, bearer caller, the SDK's session manager),
``server`` (the SDK's low-level server and its handlers), ``reads`` (URIs, pages, contents),
``tools`` (tag_artifact, list_artifacts, read_artifact), ``watch`` (notifications from the events)."""
