"""lifelong_learning.nystrom's names loaded at first use (__init__.py): an error while their module
loads surfaces as itself, not as "cannot import name"."""

import sys

import pytest

import lifelong_learning.nystrom as nystrom


@pytest.fixture
def broken_home(tmp_path, monkeypatch):
    """A module of the package that fails to load with an AttributeError, home of the name ``Broken``."""
    (tmp_path / "broken_home.py").write_text("import math\n\nVALUE = math.no_such_constant\n")
    monkeypatch.setattr(nystrom, "__path__", [*nystrom.__path__, str(tmp_path)])
    monkeypatch.setitem(nystrom._HOMES, "Broken", "broken_home")
    yield
    sys.modules.pop("lifelong_learning.nystrom.broken_home", None)


def test_a_module_that_fails_to_load_surfaces_its_own_error(broken_home):
    with pytest.raises(ImportError, match="broken_home") as caught:
        from lifelong_learning.nystrom import Broken  # noqa: F401
    cause = caught.value.__cause__
    assert isinstance(cause, AttributeError) and "no_such_constant" in str(cause)


def test_the_names_load_at_first_use_and_others_are_no_attributes():
    from lifelong_learning.nystrom import tune
    from lifelong_learning.nystrom.tuning import tune as defined

    assert tune is defined
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = nystrom.nothing
