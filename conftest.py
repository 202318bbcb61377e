"""The fixtures both test suites share (tests/ and the lab's experiments/tests/), defined
once so a session builds the demo datasets and trains the overfit models once."""

pytest_plugins = ["tests.conftest_data"]


def pytest_collection_modifyitems(config, items):
    """The files that hold end-to-end (`integration`) tests first, each kept whole and in
    order: pytest-xdist hands out files in this order (`--dist loadfile`), so the long
    runs start at once on every worker instead of one of them finishing the suite alone."""
    heavy = {item.path for item in items if item.get_closest_marker("integration")}
    items.sort(key=lambda item: item.path not in heavy)  # stable: the order within each kind holds
