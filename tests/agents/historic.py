"""A declared test agent with history rules: 5 versions per record, 3 for drafts, a cap of 4."""

from artifacts_app.registry import Kind, define_artifacts

artifacts = define_artifacts(
    kinds={
        "draft": Kind("A draft, kept for 3 versions.", keep_versions=3),
        "note": Kind("A note, kept for the agent's 5 versions."),
        "single": Kind("No history: one version.", keep_versions=1),
    },
    max=4,
    keep_versions=5,
)
