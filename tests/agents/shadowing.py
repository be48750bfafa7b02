from artifacts_app.registry import Kind, define_artifacts

artifacts = define_artifacts(kinds={"note": Kind("A note.")}, agent_tool=True)


def tag_artifact(**kwargs):
    """The agent's own tool of the same name."""
    return kwargs
