"""notebooks/ddp_train.py under torchrun, with real processes (Gloo on the CPU here, NCCL where GPUs
exist), and helpers.ddp, which finds, shows and launches it. One torchrun run per behaviour."""

import ast
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DistributedSampler
from torchvision import transforms

from helpers.data import load_cifar10
from helpers.ddp import choose_backend, launch, script_path, show
from helpers.models import CifarNet

SCRIPT = Path(__file__).resolve().parent.parent / "notebooks" / "ddp_train.py"
HANG = """import datetime
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))
total = torch.ones(1)
if dist.get_rank() == 0:  # a collective only rank 0 calls
    dist.all_reduce(total)
dist.barrier()
dist.destroy_process_group()
"""


def torchrun(*args, nproc=2, launcher_args=("--standalone",), script=SCRIPT, **extra_env):
    """Run a script under torchrun with the synthetic data; a failure raises with the processes' output."""
    env = {"COURSE_DATA": "synthetic", "OMP_NUM_THREADS": "1", **extra_env}
    return launch(
        args, nproc=nproc, script=script, launcher_args=launcher_args, env=env, timeout=240, echo=False
    )


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_script_is_short_and_shows_every_piece_of_ddp():
    text = SCRIPT.read_text()
    assert len(text.splitlines()) <= 200
    pieces = ["init_process_group(", "DistributedSampler(", "set_epoch(epoch)", "DistributedDataParallel("]
    pieces += ["dist.all_reduce(", "if rank == 0:", "destroy_process_group()"]
    for piece in pieces:
        assert piece in text, piece
    functions = {node.name for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)}
    assert {"setup", "load_data", "train", "save", "main"} <= functions


def test_two_gloo_processes_under_a_rendezvous_train_and_end_with_identical_weights(tmp_path):
    """Launched with the several-machines line (c10d rendezvous on an endpoint, not --standalone)."""
    launcher = [
        "--nnodes=1",
        "--rdzv-id=test",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{_free_port()}",
    ]
    out = torchrun(
        "--epochs", 2, "--train-size", 512, "--test-size", 256, "--batch-size", 64, "--max-steps", 1,
        "--out", tmp_path / "ddp.pt", launcher_args=launcher,
    )  # fmt: skip
    assert "world size 2 (2 on this machine), backend gloo, rank 0 on cpu" in out
    assert "batch 64 per process, 128 per step in all; lr 0.02" in out
    lines = out.splitlines()
    assert sum(line.startswith("epoch ") for line in lines) == 2  # rank 0 alone logs
    assert sum(line.startswith("Dataset: ") for line in lines) == 2  # rank 0 alone says which data
    assert "rank 0/2: largest weight difference from rank 0 = 0.0" in lines
    assert "rank 1/2: largest weight difference from rank 0 = 0.0" in lines
    # rank 0's checkpoint: the plain model's keys, loaded on the CPU, changed by training
    saved = torch.load(tmp_path / "ddp.pt", map_location="cpu", weights_only=True)
    assert not any(key.startswith("module.") for key in saved["model"])
    plain = CifarNet()
    plain.load_state_dict(saved["model"])
    assert saved["epoch"] == 1 and saved["world_size"] == 2 and saved["backend"] == "gloo"
    assert len(saved["history"]) == 2 and not list(tmp_path.glob("*.tmp"))
    torch.manual_seed(0)
    assert not torch.equal(CifarNet().state_dict()["fc3.weight"], saved["model"]["fc3.weight"])


def _first_batch_step(batch, lr, size=256):
    """One SGD step of CifarNet in this process on the first `batch` images of the order that
    DistributedSampler draws for world size 1 in epoch 0, as the script seeds it."""
    normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    data = load_cifar10(train=True, transform=normalize, size=size, source="synthetic")
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=0)
    sampler.set_epoch(0)
    order = list(sampler)[:batch]
    images = torch.stack([data[i][0] for i in order])
    targets = torch.tensor([data[i][1] for i in order])
    torch.manual_seed(0)
    model = CifarNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss = nn.CrossEntropyLoss()(model(images), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return model.state_dict()


def test_two_processes_of_batch_b_take_the_same_step_as_one_process_of_batch_2b(tmp_path):
    # on the CPU even where GPUs exist: a GPU's TF32 convolutions would differ slightly
    torchrun(
        "--epochs", 1, "--max-steps", 1, "--train-size", 256, "--test-size", 16, "--batch-size", 16,
        "--out", tmp_path / "two.pt", CUDA_VISIBLE_DEVICES="",
    )  # fmt: skip
    two = torch.load(tmp_path / "two.pt", weights_only=True)["model"]
    one = _first_batch_step(batch=32, lr=0.01 * 32 / 64)  # the script's rate for a global batch of 32
    torch.manual_seed(0)
    start = CifarNet().state_dict()
    for key in one:
        assert not torch.equal(one[key], start[key]), (
            f"{key} did not move: the comparison would prove nothing"
        )
        torch.testing.assert_close(two[key], one[key], rtol=1e-5, atol=1e-6)
    other = _first_batch_step(batch=16, lr=0.01 * 32 / 64)  # half the batch: the check can fail
    assert not torch.allclose(other["fc3.weight"], two["fc3.weight"], rtol=1e-5, atol=1e-6)


def test_running_without_torchrun_says_how_to_launch(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")}
    result = subprocess.run(
        [sys.executable, SCRIPT, "--epochs", "1"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    assert (
        "torchrun --standalone --nproc-per-node=2 ddp_train.py" in result.stderr and "RANK" in result.stderr
    )


def test_ranks_that_disagree_on_a_collective_fail_at_the_timeout_with_where_each_waits(tmp_path):
    (tmp_path / "hang.py").write_text(HANG)
    started = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        torchrun(script=tmp_path / "hang.py")
    message = str(failed.value)
    assert "torchrun exited with" in message and "Timed out waiting 2000ms" in message
    assert "[rank0]:     dist.all_reduce(total)" in message and "[rank1]:     dist.barrier()" in message
    assert time.monotonic() - started < 120


def test_a_port_in_use_fails_at_once_and_standalone_avoids_it(tmp_path):
    joins = "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.barrier()\n"
    (tmp_path / "ok.py").write_text(joins + "dist.destroy_process_group()\nprint('joined')\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        static = ["--master-addr=127.0.0.1", f"--master-port={port}"]
        with pytest.raises(RuntimeError, match="EADDRINUSE"):
            torchrun(script=tmp_path / "ok.py", launcher_args=static)
        assert torchrun(script=tmp_path / "ok.py").count("joined") == 2  # --standalone: a free port


def test_the_default_timeouts_are_30_minutes_for_gloo_and_10_for_nccl():
    from datetime import timedelta

    from torch.distributed.constants import default_pg_nccl_timeout, default_pg_timeout

    assert default_pg_timeout == timedelta(minutes=30)
    assert default_pg_nccl_timeout in (timedelta(minutes=10), None)  # None: built without NCCL


def _alive(marker):
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(proc.name)
        except OSError:
            pass
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_a_run_past_its_timeout_is_stopped_with_its_workers(tmp_path):
    marker = str(tmp_path / "timeout.pt")  # in the command line of torchrun and of each worker
    most, done = [0], threading.Event()

    def watch():  # torchrun and its two workers make 3
        while not done.is_set():
            most[0] = max(most[0], len(_alive(marker)))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with pytest.raises(RuntimeError, match="ran longer than 15 s and was stopped"):
            launch(["--epochs", 100, "--train-size", 4096, "--out", marker], nproc=2, timeout=15, echo=False,
                   env={"COURSE_DATA": "synthetic"})  # fmt: skip
    finally:
        done.set()
        watcher.join()
    assert most[0] >= 3, f"torchrun never ran its two workers (at most {most[0]} processes seen)"
    deadline = time.monotonic() + 30
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(marker), "workers outlived torchrun"


def test_the_backend_follows_the_hardware_as_the_script_chooses_it():
    backend, device_type = choose_backend(local_world_size=1)
    assert (backend, device_type) == (("nccl", "cuda") if torch.cuda.is_available() else ("gloo", "cpu"))
    # more processes than GPUs: they cannot each have one, so Gloo on the CPU
    assert choose_backend(local_world_size=torch.cuda.device_count() + 1) == ("gloo", "cpu")


def test_show_prints_a_function_with_the_files_line_numbers(capsys, tmp_path):
    text = show(SCRIPT, "setup")
    assert capsys.readouterr().out == text + "\n"
    first = text.splitlines()[0]
    number = int(first.split()[0])
    assert SCRIPT.read_text().splitlines()[number - 1] == first[5:] and "def setup" in first
    with pytest.raises(ValueError, match="defines no 'nothing'"):
        show(SCRIPT, "nothing")
    (tmp_path / "two.py").write_text("a = 1\nb = 2\n")
    assert show(tmp_path / "two.py") == "  1  a = 1\n  2  b = 2"


def test_script_path_finds_the_notebooks_script(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # not next to the notebook: the checkout's notebooks/ folder
    assert script_path().resolve() == SCRIPT
    (tmp_path / "ddp_train.py").write_text("")
    assert script_path() == Path("ddp_train.py")  # next to the notebook


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"script_args": "--epochs 2"}, TypeError, r"script_args must be a list of words.*shlex.split"),
        ({"script_args": ["--train-size", None]}, TypeError, r"script_args\[1\] is None"),
        ({"launcher_args": "--standalone"}, TypeError, "launcher_args must be a list"),
        ({"nproc": 0}, ValueError, "nproc .*1 or more"),
        ({"timeout": 0}, ValueError, "timeout must be a number of seconds above 0"),
    ],
)
def test_launch_refuses_arguments_it_would_mangle_before_starting_anything(kwargs, error, words):
    with pytest.raises(error, match=words):
        launch(**{"script_args": ["--epochs", 1], "nproc": 1, **kwargs})


@requires_cuda
def test_one_gpu_runs_world_size_one_on_nccl(tmp_path):
    out = torchrun(
        "--epochs", 1, "--train-size", 2048, "--test-size", 512, "--out", tmp_path / "ddp.pt", nproc=1
    )
    assert "world size 1 (1 on this machine), backend nccl, rank 0 on cuda:0" in out
    saved = torch.load(tmp_path / "ddp.pt", map_location="cpu", weights_only=True)
    assert saved["backend"] == "nccl" and saved["world_size"] == 1
    CifarNet().load_state_dict(saved["model"])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_run_one_process_each_on_nccl(tmp_path):
    out = torchrun("--epochs", 1, "--train-size", 4096, "--test-size", 512, "--out", tmp_path / "ddp.pt")
    assert "world size 2 (2 on this machine), backend nccl" in out
    assert "rank 1/2: largest weight difference from rank 0 = 0.0" in out
