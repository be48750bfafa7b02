from artifacts_app.registry import define_artifacts

artifacts = define_artifacts(kinds={}, agent_tool=True)
