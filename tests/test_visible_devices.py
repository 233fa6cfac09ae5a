"""Choosing GPUs: CUDA_VISIBLE_DEVICES in the environment and in os.environ, and seed 001's misspelling.

Each count comes from a fresh Python process, because CUDA reads the variable once, when it starts,
and counts the GPUs a tensor can be made on (not ``device_count()``, which follows the variable until
PyTorch's CUDA state is set up). On a machine without a GPU every count is 0, so the counting tests
only prove their point on a GPU; the parser test shows on any machine which variable PyTorch reads.
"""

import inspect
import os
import subprocess
import sys

import pytest
import torch
from conftest import requires_cuda

from helpers.devices import gpus_in_fresh_process, gpus_in_fresh_processes

HIDE_ALL = {"CUDA_VISIBLE_DEVICES": ""}
# The cases of the tests below that run on any machine, each in a fresh process, all started at once
CASES = {
    "nothing set": {},
    "hidden in the shell": {"env": HIDE_ALL},
    "hidden in code": {"set_in_code": HIDE_ALL},
    "misspelt in the shell": {"env": {"CUDA_VISIBLE_DEVICE": ""}},
    "misspelt in code": {"set_in_code": {"CUDA_VISIBLE_DEVICE": ""}},
    "hidden too late": {"set_in_code": HIDE_ALL, "after_is_available": True},
}


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ)


@pytest.fixture(scope="module")
def found():
    """What the fresh process of each of CASES found, from an environment without either variable."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ("CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICE"):
            monkeypatch.delenv(name, raising=False)
        return gpus_in_fresh_processes(CASES)


def test_pytorch_reads_cuda_visible_devices_and_ignores_the_misspelling(clean_env, monkeypatch):
    # torch.cuda._parse_visible_devices is private: it is used here only to show which variable
    # PyTorch reads (it counts GPUs with it before CUDA starts), on machines that have no GPU. It
    # reads the environment on each call, so this process can show it.
    parsed = torch.cuda._parse_visible_devices
    everything = list(range(64))  # no restriction
    assert parsed() == everything
    monkeypatch.setenv("CUDA_VISIBLE_DEVICE", "1")
    assert parsed() == everything
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert parsed() == [1, 2]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert parsed() == []


def test_hiding_every_gpu_leaves_none(found):
    assert found["hidden in the shell"].usable == 0
    assert found["hidden in code"].usable == 0


def test_the_probe_makes_tensors_rather_than_trusting_device_count(found):
    """The count is where tensors can be made; a failure is reported with CUDA's own words."""
    probe = found["nothing set"]
    assert probe.usable == torch.cuda.device_count()
    if probe.usable:
        assert probe.default_device == "cuda:0"
        assert probe.device_count_after == probe.usable
    else:
        assert probe.default_device is None and probe.device_count_before == 0
        assert probe.error is not None and ("NVIDIA driver" in probe.error or "CUDA" in probe.error)


def test_the_misspelt_variable_changes_nothing(found):
    everything = found["nothing set"].usable
    assert found["misspelt in the shell"].usable == everything
    assert found["misspelt in code"].usable == everything


def test_nvml_based_check_is_read_by_is_available():
    """Which call starts CUDA: is_available() asks NVML instead when PYTORCH_NVML_BASED_CUDA_CHECK=1.

    Shown from PyTorch itself on any machine: with the variable set, is_available() goes through
    device_count() (NVML), without it straight to the CUDA runtime (cudaGetDeviceCount).
    """
    source = inspect.getsource(torch.cuda.is_available)
    assert "PYTORCH_NVML_BASED_CUDA_CHECK" in inspect.getsource(torch.cuda._nvml_based_avail)
    assert "_nvml_based_avail()" in source and "_cuda_getDeviceCount()" in source


@requires_cuda
def test_setting_the_variable_after_cuda_started_changes_nothing(clean_env):
    """device_count() follows the variable set after CUDA started; tensors tell the truth."""
    everything = gpus_in_fresh_process().usable
    assert everything >= 1
    assert gpus_in_fresh_process(set_in_code=HIDE_ALL).usable == 0
    default_check = {"PYTORCH_NVML_BASED_CUDA_CHECK": "0"}  # whatever the machine sets
    late = gpus_in_fresh_process(env=default_check, set_in_code=HIDE_ALL, after_is_available=True)
    assert late.usable == everything and late.default_device == "cuda:0"
    assert late.device_count_before == 0  # device_count() follows the variable, not CUDA
    nvml = gpus_in_fresh_process(
        env={"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}, set_in_code=HIDE_ALL, after_is_available=True
    )
    assert nvml.usable == 0  # is_available() asked NVML and started nothing


@requires_cuda
def test_choosing_one_gpu_renumbers_it_as_cuda0(clean_env):
    last = torch.cuda.device_count() - 1
    env = {"CUDA_VISIBLE_DEVICES": str(last)}
    assert gpus_in_fresh_process(env=env).usable == 1
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
        gpus_in_fresh_process(env={"CUDA_VISIBLE_DEVICES": 1})
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES"):
        gpus_in_fresh_process(set_in_code={"A=B": "1"})


def test_the_fresh_processes_of_several_cases_run_at_once_and_agree_with_one_at_a_time(found, clean_env):
    assert list(found) == list(CASES)  # the names, in the order given
    for name in ("nothing set", "hidden too late"):
        assert found[name] == gpus_in_fresh_process(**CASES[name]), name


@pytest.mark.parametrize(
    "cases, words",
    [
        ({}, "cases must be a non-empty dict"),
        ([("a", {})], "cases must be a non-empty dict"),
        ({"a": {}, "b": "nothing"}, "case 'b' must be a dict with some of env, set_in_code"),
        ({"a": {"envs": HIDE_ALL}}, "case 'a' has ['envs']; the options are env, set_in_code"),
        ({"a": {"env": "CUDA_VISIBLE_DEVICES="}}, "given as a dict of name/value strings"),
    ],
)
def test_fresh_process_cases_are_checked_before_any_process_starts(cases, words):
    with pytest.raises(TypeError) as refused:
        gpus_in_fresh_processes(cases)
    assert words in str(refused.value)


def test_a_bad_variable_in_any_case_stops_them_all_before_they_start(monkeypatch):
    started = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a))
    with pytest.raises(ValueError, match="name/value strings"):
        gpus_in_fresh_processes({"fine": {}, "bad": {"set_in_code": {"CUDA_VISIBLE_DEVICES": 0}}})
    assert started == []
