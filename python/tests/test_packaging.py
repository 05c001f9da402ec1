"""The package as pip builds it: every subpackage of the source is in pyproject.toml's list."""

from pathlib import Path

import pytest

import newrllama4

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later

SOURCE = Path(newrllama4.__file__).parent


def test_every_subpackage_is_built():
    pyproject = tomllib.loads((SOURCE.parent / "pyproject.toml").read_text())
    found = {".".join(init.parent.relative_to(SOURCE.parent).parts) for init in SOURCE.rglob("__init__.py")}
    assert set(pyproject["tool"]["setuptools"]["packages"]) == found
