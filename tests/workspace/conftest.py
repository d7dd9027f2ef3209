from tests.runner.conftest import agent, open_runner, project

__all__ = ["agent", "open_runner", "project"]
