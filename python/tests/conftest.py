"""Shared fixtures of the binding's tests (python/tests/, run with pytest).

The kv package is imported from PYTHONPATH (ctest python_binding sets it to
the extension cmake -DKV_PYTHON=ON built, build/python/), else from an
installed package, else from <repo>/build/python. Every test works in its
own pytest tmp_path and checks results against a Python dict model.
"""

import os
import random
import sys

import pytest

try:
    import kv  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "build", "python"))
    import kv  # noqa: F401


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(db_path):
    d = kv.DB(db_path, create_if_missing=True)
    yield d
    d.close()


@pytest.fixture
def rnd(request):
    """A random source seeded from the test's name: runs are repeatable."""
    return random.Random(request.node.nodeid)


def model_items(model, start=None, stop=None, include_start=True, include_stop=False,
                prefix=None, reverse=False):
    """The (key, value) pairs plyvel's iterator() yields from a dict model."""
    if prefix is not None:
        items = [(k, v) for k, v in sorted(model.items()) if k.startswith(prefix)]
    else:
        items = []
        for k, v in sorted(model.items()):
            if start is not None and (k < start or (k == start and not include_start)):
                continue
            if stop is not None and (k > stop or (k == stop and not include_stop)):
                continue
            items.append((k, v))
    if reverse:
        items.reverse()
    return items


def db_items(d):
    return list(d.iterator())
