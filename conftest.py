"""The fixtures both test suites share (tests/ and the lab's experiments/tests/), defined
once so a session builds the demo datasets and trains the overfit models once."""

pytest_plugins = ["tests.conftest_data"]
