import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
requires_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")


@pytest.fixture(autouse=True)
def _clean_course_env(monkeypatch):
    """Each test starts from the defaults; tests that need a variable set it themselves."""
    for name in ("COURSE_DATA", "COURSE_DATA_DIR", "COURSE_QUICK"):
        monkeypatch.delenv(name, raising=False)


NBVAL_OUTPUT_TIMEOUT = 60  # seconds


def pytest_collection_modifyitems(config, items):
    for item in items:
        if hasattr(item, "output_timeout"):  # an nbval cell: after it ran, nbval waits for its last
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT  # outputs 5 s, too short on a busy 2-core machine
