"""The demo agent `reviewer`, declared exactly as API.md shows."""

from __future__ import annotations

from pydantic import BaseModel

from artifacts_app.registry import Kind, define_artifacts


class ReviewedPR(BaseModel):
    url: str
    verdict: str = "comment"


artifacts = define_artifacts(
    kinds={
        "reviewed-pr": Kind("A pull request this agent reviewed.", schema=ReviewedPR),
        "report": Kind("A generated report."),
    },
    agent_tool=True,  # expose the model-facing tag_artifact tool
    max=1000,  # retention cap, default 1000
)
