"""A declared agent with five kinds of nested, optional, enum, list and union fields (tool tests)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from artifacts_app.registry import Kind, define_artifacts


class Severity(StrEnum):
    low = "low"
    high = "high"


class Location(BaseModel):
    path: str
    line: int = Field(ge=1)


class Finding(BaseModel):
    """A finding, with where it is (nested models)."""

    title: str = Field(max_length=200)
    where: Location
    also: list[Location] = []


class Note(BaseModel):
    text: str
    author: str | None = None  # optional and nullable
    pinned: bool = False  # optional with a default
    score: float | None = Field(default=None, ge=0, le=1)


class Triage(BaseModel):
    severity: Severity
    status: Literal["open", "fixed", "wontfix"] = "open"


class Step(BaseModel):
    name: str
    seconds: int


class Plan(BaseModel):
    steps: list[Step]
    labels: list[str] = []


class Link(BaseModel):
    type: Literal["link"]
    url: str


class Snippet(BaseModel):
    type: Literal["snippet"]
    code: str
    language: str | None = None


class Tree(BaseModel):
    """A recursive model: kept as a $defs entry, renamed for its kind."""

    label: str
    children: list[Tree] = []


class Evidence(BaseModel):
    item: Annotated[Link | Snippet, Field(discriminator="type")]
    alternative: int | str  # a plain (undiscriminated) union
    tree: Tree | None = None


artifacts = define_artifacts(
    kinds={
        "finding": Kind("A finding in the code.", schema=Finding),
        "note": Kind("A note.", schema=Note),
        "triage": Kind("A triage decision.", schema=Triage),
        "plan": Kind("A plan of steps.", schema=Plan),
        "evidence": Kind("Evidence for a finding.", schema=Evidence),
    },
    agent_tool=True,
    max=100_000,
)
