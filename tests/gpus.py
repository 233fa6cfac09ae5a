"""Marks for the tests that need a CUDA GPU, in a module of their own: `conftest.py` does not import
torch, so a run of a few tests that do not use it (as `test_clones.py` makes) starts faster."""

import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
