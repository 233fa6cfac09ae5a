"""helpers.ddp under torchrun, with real processes: Gloo on the CPU here, NCCL where GPUs exist."""

import contextlib
import io
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DistributedSampler
from torchvision import transforms

from helpers.checkpoint import load_checkpoint
from helpers.data import load_cifar10
from helpers.ddp import BASE_BATCH, BASE_LR, MODELS, _say, choose_backend, launch, scaled_lr
from helpers.ddp import main as ddp_main


def torchrun(*args, nproc=2, launch_args=("--standalone",), **extra_env):
    """Run helpers.ddp under torchrun; a failure raises with the processes' output."""
    env = {"COURSE_DATA": "synthetic", "OMP_NUM_THREADS": "1", **extra_env}
    return launch(args, nproc=nproc, launcher_args=launch_args, env=env, timeout=240, echo=False)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_train_and_end_with_identical_weights(tmp_path):
    """Launched with the multi-machine launch line (rendezvous on an endpoint, not --standalone): the
    same script runs. Two processes of 64 give a global batch of 128, so lr 0.02, reached by a warm-up
    over the first epoch's 4 steps; one step in each of the two epochs leaves it half way at 0.015."""
    launcher = (
        "--nnodes=1",
        "--rdzv-id=test",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{_free_port()}",
    )
    out = torchrun(
        "--epochs", 2, "--train-size", 512, "--test-size", 256, "--batch-size", 64, "--max-steps", 1,
        "--min-accuracy", 0, "--out", tmp_path / "ddp.pt", "--dump-weights", tmp_path / "weights",
        launch_args=launcher,
    )  # fmt: skip
    assert "world size 2 (2 on this machine), backend gloo" in out
    assert "128 per step in all; lr 0.02 (0.01 per 64 images, scaled to the global batch)" in out
    # only rank 0 logs the epochs; every rank reports its weight check
    assert sum(line.startswith("epoch ") for line in out.splitlines()) == 2
    assert "rank 0/2: largest weight difference from rank 0 = 0.0" in out
    assert "rank 1/2: largest weight difference from rank 0 = 0.0" in out
    # the weights each rank holds, read back here: identical, and changed by training
    rank0 = torch.load(tmp_path / "weights" / "rank0.pt", weights_only=True)
    rank1 = torch.load(tmp_path / "weights" / "rank1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys()
    assert all(torch.equal(rank0[key], rank1[key]) for key in rank0)
    torch.manual_seed(0)
    untrained = MODELS["cifarnet"]().state_dict()
    assert not torch.equal(untrained["fc3.weight"], rank0["fc3.weight"])
    # rank 0's checkpoint loads into a plain model on the CPU, without the DDP "module." prefix
    plain = MODELS["cifarnet"]()
    epoch, extra = load_checkpoint(tmp_path / "ddp.pt", plain, map_location="cpu")
    assert epoch == 1 and extra["world_size"] == 2 and extra["backend"] == "gloo"
    assert all(torch.equal(value, rank0[key]) for key, value in plain.state_dict().items())
    assert len(extra["history"]) == 2 and not list(tmp_path.glob(".*.tmp"))
    # the warm-up: two of its four steps taken
    saved = torch.load(tmp_path / "ddp.pt", weights_only=True)
    steps = 512 // 128
    assert saved["optimizer"]["param_groups"][0]["lr"] == pytest.approx(BASE_LR + BASE_LR * 2 / steps)
    assert extra["lr"] == pytest.approx(2 * BASE_LR)
    # each rank's random state, for an exact resume under DDP
    assert isinstance(saved["rng_per_rank"], list) and len(saved["rng_per_rank"]) == 2


def test_a_negative_number_of_workers_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as stopped:
        ddp_main(["--workers", "-1"])
    assert stopped.value.code == 2
    assert "--workers must be 0 or more (0: no worker processes), got -1" in capsys.readouterr().err


def _first_batch_step(batch, seed=0, lr=None, size=256):
    """One SGD step of the script's model, in this process, on the first `batch` images of the
    order DistributedSampler draws for world size 1."""
    normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    data = load_cifar10(train=True, transform=normalize, size=size, source="synthetic")
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=seed)
    sampler.set_epoch(0)
    order = list(sampler)[:batch]
    images = torch.stack([data[i][0] for i in order])
    targets = torch.tensor([data[i][1] for i in order])
    torch.manual_seed(seed)
    model = MODELS["cifarnet"]()
    lr = scaled_lr(batch) if lr is None else lr  # what the script chooses for this global batch
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss = nn.CrossEntropyLoss()(model(images), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return model.state_dict()


def test_two_processes_of_batch_b_take_the_same_step_as_one_process_of_batch_2b(tmp_path):
    """One step of two torchrun processes of batch 16 against one step of batch 32 in this process,
    in the script's order, with the script's model and learning rate (``_first_batch_step``)."""
    # on the CPU, even where GPUs exist: a GPU's TF32 convolutions would differ slightly. The ranks
    # read their batches through loader worker processes, the step here without: the sampler's order
    # and the transform must be the same either way.
    out = torchrun(
        "--epochs", 1, "--max-steps", 1, "--train-size", 256, "--test-size", 16, "--batch-size", 16,
        "--workers", 2, "--out", tmp_path / "a.pt", "--dump-weights", tmp_path / "two",
        CUDA_VISIBLE_DEVICES="",
    )  # fmt: skip
    assert "2 loader worker(s) per process" in out
    two = torch.load(tmp_path / "two" / "rank0.pt", weights_only=True)
    one = _first_batch_step(batch=32)
    torch.manual_seed(0)
    start = MODELS["cifarnet"]().state_dict()
    for key in one:
        assert not torch.equal(one[key], start[key]), (
            f"{key} did not move: the comparison would prove nothing"
        )
        torch.testing.assert_close(two[key], one[key], rtol=1e-5, atol=1e-6)
    # and a different batch would not pass: the check can fail
    other = _first_batch_step(batch=16, lr=scaled_lr(32))
    assert not torch.allclose(other["fc3.weight"], two["fc3.weight"], rtol=1e-5, atol=1e-6)


def test_the_learning_rate_follows_the_global_batch():
    assert scaled_lr(BASE_BATCH) == BASE_LR
    assert scaled_lr(32) == BASE_LR / 2 and scaled_lr(256) == 4 * BASE_LR
    with pytest.raises(ValueError, match="at least 1"):
        scaled_lr(0)


def test_a_diverging_run_stops_with_a_clear_message_and_saves_nothing(tmp_path):
    with pytest.raises(RuntimeError) as stopped:
        torchrun(
            "--epochs", 2, "--max-steps", 3, "--train-size", 256, "--test-size", 16, "--lr", 1e12,
            "--out", tmp_path / "ddp.pt",
        )  # fmt: skip
    # a failed launch raises with the end of the processes' output, which says why
    assert "torchrun exited with" in str(stopped.value)
    assert "stopped: epoch 1: the training loss became nan" in str(stopped.value)
    assert "Lower the learning rate (--lr)" in str(stopped.value)
    assert not (tmp_path / "ddp.pt").exists()


def test_a_run_that_stays_at_chance_stops_instead_of_saving_a_dead_model(tmp_path, monkeypatch, capsys):
    """In this process, as a world of one: the code each rank runs under torchrun, on a real process group."""
    world = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
    for name, value in {**world, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COURSE_DATA", "synthetic")
    with pytest.raises(SystemExit) as stopped:
        ddp_main(
            ["--epochs", "2", "--max-steps", "2", "--train-size", "128", "--test-size", "64", "--lr", "0",
             "--min-accuracy", "0.5", "--workers", "0", "--out", str(tmp_path / "ddp.pt")]
        )  # fmt: skip
    assert stopped.value.code == 1 and not dist.is_initialized()
    message = capsys.readouterr().out
    assert "stopped: epoch 2: test accuracy" in message and "below --min-accuracy 50%" in message
    assert "this epoch's checkpoint was not saved" in message
    epoch, _ = load_checkpoint(tmp_path / "ddp.pt", MODELS["cifarnet"](), map_location="cpu")
    assert epoch == 0  # the first epoch's checkpoint; the failed second one was not written


def test_running_without_torchrun_says_how_to_launch(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")}
    result = subprocess.run(
        [sys.executable, "-m", "helpers.ddp", "--epochs", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "torchrun --standalone --nproc_per_node=2 -m helpers.ddp" in result.stderr
    assert "RANK" in result.stderr


def _workers_alive(marker):
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(proc.name)
        except OSError:
            pass
    return found


def test_a_run_past_its_timeout_is_stopped_with_its_workers(tmp_path):
    marker = str(tmp_path / "timeout.pt")  # appears in the command line of torchrun and of each worker
    most, done = [0], threading.Event()

    def watch():  # how many of those processes ran at once: torchrun and its two workers make 3
        while not done.is_set():
            most[0] = max(most[0], len(_workers_alive(marker)))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with pytest.raises(RuntimeError, match="ran longer than 15 s and was stopped"):
            launch(["--epochs", 100, "--train-size", 4096, "--out", marker], nproc=2, timeout=15, echo=False)
    finally:
        done.set()
        watcher.join()
    assert most[0] >= 3, f"torchrun never ran its two workers (at most {most[0]} processes seen)"
    deadline = time.monotonic() + 30
    while _workers_alive(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _workers_alive(marker), "workers outlived torchrun"


def test_an_unknown_model_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as stopped:
        ddp_main(["--model", "resnet"])
    assert stopped.value.code == 2 and "invalid choice: 'resnet'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="nproc .*must be 1 or more, got 0"):
        launch([], nproc=0)


def test_backend_follows_the_hardware():
    backend, device_type = choose_backend(local_world_size=1)
    if torch.cuda.is_available():
        assert (backend, device_type) == ("nccl", "cuda")
    else:
        assert (backend, device_type) == ("gloo", "cpu")
    # more processes than GPUs: NCCL cannot give each its own GPU, so Gloo on the CPU
    assert choose_backend(local_world_size=torch.cuda.device_count() + 1) == ("gloo", "cpu")


def test_the_backend_is_pytorchs_default_for_the_device_and_the_same_without_that_call(monkeypatch):
    chosen = [choose_backend(local_world_size=n) for n in (1, torch.cuda.device_count() + 1)]
    default = getattr(dist, "get_default_backend_for_device", None)  # PyTorch 2.6 and later
    if default is not None:
        assert all(backend == default(device_type) for backend, device_type in chosen)
        assert (default("cpu"), default("cuda")) == ("gloo", "nccl")  # the names used without it
    monkeypatch.delattr(dist, "get_default_backend_for_device", raising=False)  # as on an older PyTorch
    assert not hasattr(dist, "get_default_backend_for_device")
    assert [choose_backend(local_world_size=n) for n in (1, torch.cuda.device_count() + 1)] == chosen


@requires_cuda
def test_one_gpu_runs_world_size_one_on_nccl(tmp_path):
    out = torchrun(
        "--epochs", 1, "--train-size", 2048, "--test-size", 512, "--out", tmp_path / "ddp.pt", nproc=1
    )  # fmt: skip
    assert "backend nccl, rank 0 on cuda:0" in out
    plain = MODELS["cifarnet"]()
    epoch, extra = load_checkpoint(tmp_path / "ddp.pt", plain, map_location="cpu")  # written on cuda:0
    assert epoch == 0 and extra["backend"] == "nccl" and extra["world_size"] == 1
    assert all(p.device.type == "cpu" for p in plain.parameters())


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_run_one_process_each_on_nccl(tmp_path):
    out = torchrun(
        "--epochs", 1, "--train-size", 4096, "--test-size", 512, "--out", tmp_path / "ddp.pt", nproc=2
    )
    assert "world size 2 (2 on this machine), backend nccl" in out
    assert "rank 1/2: largest weight difference from rank 0 = 0.0" in out


class _Writes(io.RawIOBase):
    """A raw stream that records each write it receives, as the write system calls of a pipe."""

    def __init__(self):
        self.calls = []

    def writable(self):
        return True

    def write(self, data):
        self.calls.append(bytes(data))
        return len(data)


def test_a_rank_writes_each_line_at_once_even_when_python_is_unbuffered():
    """torchrun's ranks share one pipe. Unbuffered (PYTHONUNBUFFERED=1, as in CI) `print` writes a
    line's text and its newline separately, so two ranks' lines can run together and a rank's line
    be lost to a reader. sys.stdout under -u is this wrapper."""
    raw = _Writes()
    unbuffered_stdout = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(unbuffered_stdout):
        print("rank 1/2: done", flush=True)
        assert raw.calls == [b"rank 1/2: done", b"\n"], "the harness no longer shows print's two writes"
        raw.calls.clear()
        _say("rank 1/2: done")
    assert raw.calls == [b"rank 1/2: done\n"]


def test_lines_of_two_unbuffered_ranks_sharing_a_pipe_stay_whole():
    line = "rank {}: largest weight difference from rank 0 = 0.0"
    code = (  # both import first (seconds), then write at the same moment
        "import sys\nfrom helpers.ddp import _say\n"
        "sys.stderr.write('ready\\n'); sys.stderr.flush(); sys.stdin.read(1)\n"
        f"for _ in range(2000):\n    _say({line!r}.format(sys.argv[1]))"
    )
    read, write = os.pipe()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(rank)],
            stdin=subprocess.PIPE,
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
        )
        for rank in (0, 1)
    ]
    os.close(write)
    assert [process.stderr.readline() for process in ranks] == [b"ready\n"] * 2
    for process in ranks:
        process.stdin.write(b"go")
        process.stdin.close()
    with os.fdopen(read) as pipe:
        lines = pipe.read().splitlines()
    assert [process.wait(timeout=60) for process in ranks] == [0, 0]
    assert sorted(set(lines)) == [line.format(0), line.format(1)] and len(lines) == 4000


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"script_args": "--epochs 2"}, TypeError, r"script_args is one string.*shlex.split\('--epochs 2'\)"),
        ({"script_args": "--epochs=2 --out a.pt"}, TypeError, "split into characters"),
        ({"script_args": b"--epochs 2"}, TypeError, "one string"),
        ({"script_args": ["--train-size", None]}, TypeError, r"script_args\[1\] is None"),
        ({"script_args": ["--no-shuffle", True]}, TypeError, r"script_args\[1\] is True"),
        ({"script_args": {"--epochs": 2}}, TypeError, "script_args must be a list"),
        ({"launcher_args": "--standalone"}, TypeError, "launcher_args is one string"),
        ({"nproc": "2"}, TypeError, "nproc"),
        ({"nproc": 2.0}, TypeError, "nproc=2"),
        ({"nproc": -1}, ValueError, "nproc .*1 or more"),
        ({"env": {"OMP_NUM_THREADS": 1}}, TypeError, "env must map .*'1', not 1"),
        ({"env": ["A=1"]}, TypeError, "env must map"),
        ({"timeout": 0}, ValueError, "timeout must be a number of seconds above 0"),
        ({"timeout": "60"}, ValueError, "timeout"),
        ({"echo": "no"}, TypeError, "echo .*True or False"),
    ],
)
def test_launch_refuses_arguments_it_would_mangle_before_starting_anything(kwargs, error, words):
    arguments = {"script_args": ["--epochs", 1], "nproc": 1, **kwargs}
    with pytest.raises(error, match=words):
        launch(**arguments)
