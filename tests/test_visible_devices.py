"""Choosing GPUs: CUDA_VISIBLE_DEVICES in the environment and in os.environ, and seed 001's misspelling.

Each check runs in a fresh Python process, because CUDA reads the variable once, when it starts.
On a machine without a GPU every count is 0, so the counting tests only prove their point on a GPU;
the parser tests below show on any machine which variable PyTorch reads.
"""

import os
import subprocess
import sys

import pytest
import torch
from conftest import requires_cuda

from helpers.devices import gpu_count_in_fresh_process

HIDE_ALL = {"CUDA_VISIBLE_DEVICES": ""}


def _parsed_in_fresh_process(env):
    # torch.cuda._parse_visible_devices is private: it is used here only to show which variable
    # PyTorch reads (it counts GPUs with it before CUDA starts), on machines that have no GPU.
    code = "import torch; print(torch.cuda._parse_visible_devices())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120
    )
    return out.stdout.strip()


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ)


def test_pytorch_reads_cuda_visible_devices_and_ignores_the_misspelling(clean_env):
    assert _parsed_in_fresh_process({**clean_env, "CUDA_VISIBLE_DEVICES": "1,2"}) == "[1, 2]"
    assert _parsed_in_fresh_process({**clean_env, "CUDA_VISIBLE_DEVICES": ""}) == "[]"
    everything = str(list(range(64)))  # no restriction
    assert _parsed_in_fresh_process(clean_env) == everything
    assert _parsed_in_fresh_process({**clean_env, "CUDA_VISIBLE_DEVICE": "1"}) == everything


def test_hiding_every_gpu_leaves_none(clean_env):
    assert gpu_count_in_fresh_process(env=HIDE_ALL) == 0
    assert gpu_count_in_fresh_process(set_in_code=HIDE_ALL) == 0


def test_the_misspelt_variable_changes_nothing(clean_env):
    everything = gpu_count_in_fresh_process()
    assert everything == torch.cuda.device_count()
    assert gpu_count_in_fresh_process(env={"CUDA_VISIBLE_DEVICE": ""}) == everything
    assert gpu_count_in_fresh_process(set_in_code={"CUDA_VISIBLE_DEVICE": ""}) == everything


@requires_cuda
def test_setting_the_variable_after_cuda_started_changes_nothing(clean_env):
    everything = gpu_count_in_fresh_process()
    assert everything >= 1
    assert gpu_count_in_fresh_process(set_in_code=HIDE_ALL) == 0
    assert gpu_count_in_fresh_process(set_in_code=HIDE_ALL, after_cuda_init=True) == everything


@requires_cuda
def test_choosing_one_gpu_renumbers_it_as_cuda0(clean_env):
    last = torch.cuda.device_count() - 1
    env = {"CUDA_VISIBLE_DEVICES": str(last)}
    assert gpu_count_in_fresh_process(env=env) == 1
    code = "import torch; print(torch.cuda.get_device_name(0))"
    name = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean_env, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert name == torch.cuda.get_device_name(last)


def test_bad_variables_are_refused_with_an_example():
    with pytest.raises(ValueError, match="name/value strings"):
        gpu_count_in_fresh_process(env={"CUDA_VISIBLE_DEVICES": 1})
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES"):
        gpu_count_in_fresh_process(set_in_code={"A=B": "1"})
