"""Shared pytest fixtures."""
import os

import garage_promp  # noqa: F401  (applies the garage compat layer first)

import pytest

os.environ.setdefault('RAY_DISABLE_IMPORT_WARNING', '1')


@pytest.fixture(autouse=True)
def _dowel_clean():
    """Leave dowel's global logger and tabular as each test found them."""
    from dowel import logger, tabular
    yield
    logger.remove_all()
    tabular.clear()
