"""Bad-input suite: each case asserts the error's type, that its message names the problem and
the user's line, and that nothing was written or cached wrongly (see expect.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    """A private, empty compile cache for the test (OPUS_CACHE_DIR)."""
    root = tmp_path / "opus-cache"
    monkeypatch.setenv("OPUS_CACHE_DIR", str(root))
    monkeypatch.delenv("OPUS_CACHE_DISABLE", raising=False)
    return root
