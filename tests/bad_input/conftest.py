"""Bad-input suite: each case asserts the error's type, that its message names the problem and
the user's line, and that nothing was written or cached wrongly (see expect.py). The cache_root fixture is in tests/conftest.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

