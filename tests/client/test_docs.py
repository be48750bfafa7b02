"""docs/agents.md runs as shown: every ```python block, in order, in one namespace.

The in-process examples run against the test database; the client example against the live
daphne of ``served`` (its URL and agent key come in through the environment, as the page says).
"""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_agents_md_examples_run_as_shown(reviewer, served, monkeypatch, capsys):
    monkeypatch.setenv("ARTIFACTS_URL", served.base)
    monkeypatch.setenv("ARTIFACTS_AGENT_KEY", served.key)
    monkeypatch.setenv("ARTIFACTS_RECEIVER_URL", "http://127.0.0.1:9999/hooks/artifacts")
    blocks = python_blocks()
    assert len(blocks) >= 6
    namespace: dict = {"__name__": "agents_md"}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"docs/agents.md block {number}", "exec")
        exec(code, namespace)
    printed = capsys.readouterr().out.strip()
    shown = re.search(r"^# (Not tagged: .*)$", DOC.read_text(), flags=re.M).group(1)
    assert printed == shown  # the refusal example prints exactly what the page shows
