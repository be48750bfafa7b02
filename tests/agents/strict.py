"""A declared test agent with a schema'd kind, a plain kind, and a small cap."""

from pydantic import BaseModel

from artifacts_app.registry import Kind, define_artifacts


class Finding(BaseModel):
    title: str
    severity: int = 1
    tags: list[str] = []


artifacts = define_artifacts(
    kinds={
        "finding": Kind("A finding with a severity.", schema=Finding),
        "note": Kind("A free note."),
        "count": Kind("A number.", schema=int),
    },
    agent_tool=True,
    max=5,
)
