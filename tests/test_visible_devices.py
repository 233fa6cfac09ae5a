"""Choosing GPUs: CUDA_VISIBLE_DEVICES in the environment and in os.environ, and a misspelling.

Each count comes from a fresh Python process (CUDA reads the variable once, when it starts). Without
a GPU every count is 0, so the counts prove their point only on a GPU; the parser test shows on any
machine which variable PyTorch reads.
"""

import pytest
import torch

from helpers.fresh_process import gpus_in_fresh_processes

HIDE_ALL = {"CUDA_VISIBLE_DEVICES": ""}
LATE = {
    "env": {"PYTORCH_NVML_BASED_CUDA_CHECK": "0"},
    "set_in_code": HIDE_ALL,
    "after_is_available": True,
}
CASES = {
    "hidden in code": {"set_in_code": HIDE_ALL},
    "hidden too late": LATE,
}  # two processes, side by side


@pytest.fixture(scope="module")
def found():
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ("CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICE"):
            monkeypatch.delenv(name, raising=False)
        return gpus_in_fresh_processes(CASES)


def test_pytorch_reads_cuda_visible_devices_and_ignores_the_misspelling(monkeypatch):
    parsed = torch.cuda._parse_visible_devices  # private; reads the environment on each call
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    everything = parsed()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICE", "1")
    assert parsed() == everything
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert parsed() == [1, 2]


def test_hiding_gpus_works_before_cuda_starts_and_not_after(found):
    assert list(found) == list(CASES)  # the names, in the order given
    assert found["hidden in code"].usable == 0
    late = found["hidden too late"]
    assert (
        late.usable == torch.cuda.device_count()
    )  # CUDA had started: the variable changed nothing
    if late.usable:  # tensors land on cuda:0, while device_count() follows the variable
        assert late.default_device == "cuda:0" and late.device_count_before == 0
    else:
        assert all(probe.default_device is None and probe.error for probe in found.values())
