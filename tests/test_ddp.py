"""notebooks/ddp_train.py under torchrun with two real processes (Gloo on the CPU), and helpers.ddp,
which finds, shows and launches it. Notebook 05 runs the rest: the rendezvous, a hang, a port in
use."""

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DistributedSampler
from torchvision import transforms

from helpers.data import load_cifar10
from helpers.ddp import choose_backend, launch, script_path, show
from helpers.models import CifarNet

SCRIPT = Path(__file__).resolve().parent.parent / "notebooks" / "ddp_train.py"


def torchrun(*args, nproc=2, script=SCRIPT, timeout=240):
    """Run a script under torchrun on the CPU with the synthetic data; a failure raises with its
    output."""
    env = {"COURSE_DATA": "synthetic", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    return launch(args, nproc=nproc, script=script, env=env, timeout=timeout, echo=False)


def _one_process_step(batch, lr):
    """One SGD step of CifarNet in this process on the first `batch` of the 256 images, in the
    order that DistributedSampler draws for one process in epoch 0, as the script seeds it."""
    normalize = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)]
    )
    data = load_cifar10(train=True, transform=normalize, size=256, source="synthetic")
    order = list(DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=0))[:batch]
    torch.manual_seed(0)
    model = CifarNet()
    nn.CrossEntropyLoss()(
        model(torch.stack([data[i][0] for i in order])), torch.tensor([data[i][1] for i in order])
    ).backward()
    torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9).step()
    return model.state_dict()


def test_two_processes_of_batch_b_train_as_one_of_batch_2b_and_rank_0_saves(tmp_path):
    sizes = ["--train-size", 256, "--test-size", 16, "--batch-size", 16]
    out = torchrun("--epochs", 1, "--max-steps", 1, *sizes, "--out", tmp_path / "two.pt")
    assert "world size 2 (2 on this machine), backend gloo, rank 0 on cpu" in out
    lines = out.splitlines()
    assert sum(line.startswith("epoch ") for line in lines) == 1  # rank 0 alone logs
    agreed = {f"rank {r}/2: largest weight difference from rank 0 = 0.0" for r in (0, 1)}
    assert agreed <= set(lines)
    saved = torch.load(tmp_path / "two.pt", map_location="cpu", weights_only=True)  # rank 0's
    assert (saved["epoch"], saved["world_size"], saved["backend"]) == (1, 2, "gloo")  # epochs done
    assert [record["epoch"] for record in saved["history"]] == [1]
    assert not list(tmp_path.glob("*.tmp"))
    CifarNet().load_state_dict(saved["model"])  # the plain model's keys, no "module." prefix
    one = _one_process_step(batch=32, lr=0.01 * 32 / 64)  # the rate for a global batch of 32
    torch.manual_seed(0)
    start = CifarNet().state_dict()
    for key in one:
        assert not torch.equal(one[key], start[key]), (
            f"{key} did not move: the check would prove nothing"
        )
        torch.testing.assert_close(saved["model"][key], one[key], rtol=1e-5, atol=1e-6)


def test_a_failing_rank_is_reported_with_its_error(tmp_path):
    (tmp_path / "fail.py").write_text(
        "import os\nif os.environ['RANK'] == '1':\n    raise ValueError('rank 1 broke')\n"
    )
    with pytest.raises(
        RuntimeError, match=r"torchrun exited with status 1(.|\n)*ValueError: rank 1 broke"
    ):
        torchrun(script=tmp_path / "fail.py")


def test_a_run_past_its_timeout_is_stopped_with_its_workers(tmp_path):
    script = tmp_path / "sleep.py"  # in the command line of torchrun and of each worker
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    with pytest.raises(RuntimeError, match=r"stopped after 8 s(.|\n)*started"):  # a worker ran
        torchrun(script=script, timeout=8)
    deadline = time.monotonic() + 30
    while _alive(str(script)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(str(script)), "workers outlived torchrun"


def _alive(marker):
    """The ids of the processes whose command line holds ``marker``."""
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()


def test_the_script_is_found_and_the_backend_chosen_as_the_script_chooses_it(monkeypatch, tmp_path):
    expected = ("nccl", "cuda") if torch.cuda.is_available() else ("gloo", "cpu")
    assert choose_backend(local_world_size=1) == expected
    assert choose_backend(local_world_size=torch.cuda.device_count() + 1) == ("gloo", "cpu")
    for bad, error in (("2", TypeError), (0, ValueError)):
        with pytest.raises(error, match="local_world_size"):
            choose_backend(bad)
    monkeypatch.chdir(tmp_path)  # not next to the notebook: the checkout's notebooks/ folder
    assert script_path().resolve() == SCRIPT
    (tmp_path / "ddp_train.py").write_text("")
    assert script_path() == Path("ddp_train.py")


def test_show_prints_a_function_with_the_files_line_numbers(capsys, tmp_path):
    text = show(SCRIPT, "setup")
    first = text.splitlines()[0]  # "NNN  def setup(...):", as line NNN of the file
    assert capsys.readouterr().out == text + "\n" and "def setup" in first
    assert SCRIPT.read_text().splitlines()[int(first.split()[0]) - 1] == first[5:]
    (tmp_path / "two.py").write_text("a = 1\nb = 2\n")
    assert show(tmp_path / "two.py") == "  1  a = 1\n  2  b = 2"
    with pytest.raises(ValueError, match="defines no 'nothing'"):
        show(SCRIPT, "nothing")


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"script_args": "--epochs 2"}, TypeError, "script_args must be a list of words"),
        ({"launcher_args": "--standalone"}, TypeError, "launcher_args must be a list"),
        ({"nproc": 0}, ValueError, "nproc .*1 or more"),
        ({"timeout": 0}, ValueError, "timeout must be a number of seconds above 0"),
        ({"script": SCRIPT.parent / "nothing.py"}, FileNotFoundError, "not a file"),
        ({"script": SCRIPT.parent}, FileNotFoundError, "not a file"),
        ({"env": {"X": 1}}, TypeError, "dict of strings"),
        ({"env": "X=1"}, TypeError, "dict of strings"),
        ({"nproc": "2"}, TypeError, "nproc=2"),
        ({"echo": "yes"}, TypeError, "echo must be True or False"),
    ],
)
def test_launch_refuses_arguments_it_would_mangle_before_starting_anything(kwargs, error, words):
    with pytest.raises(error, match=words):
        launch(**{"script_args": ["--epochs", 1], "nproc": 1, **kwargs})


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--epochs", "0"], "--epochs: 0 is not 1 or more"),
        (["--batch-size", "-32"], "--batch-size: -32 is not 1 or more"),
        (["--train-size", "2.5"], "--train-size: '2.5' is not a whole number"),
        (["--test-size", ""], "--test-size: '' is not a whole number"),
        (["--max-steps", "0"], "--max-steps: 0 is not 1 or more"),
        (["--out", "{tmp}"], "is a folder: give a file"),
        (["--out", "{tmp}/new/"], "is a folder: give a file"),
        (["--out", "{tmp}/notes.txt/ddp.pt"], "notes.txt is a file, not a folder"),
        (["--lr", "0.1"], "unrecognized arguments: --lr"),
    ],
)
def test_a_wrong_flag_is_named_with_its_value(tmp_path, monkeypatch, capsys, flags, words):
    """The script's own parser, in this process: starting Python and torch once per flag costs
    seconds each; the test below runs the script itself."""
    (tmp_path / "notes.txt").write_text("notes")
    spec = importlib.util.spec_from_file_location("ddp_train_under_test", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *(f.format(tmp=tmp_path) for f in flags)])
    with pytest.raises(SystemExit) as stopped:
        script.parse_args()
    assert stopped.value.code == 2
    assert words in capsys.readouterr().err


def test_a_wrong_flag_stops_the_script_before_it_joins_the_group():
    """Run as a script, outside torchrun: joining the group would fail on the missing RANK, so
    exit status 2 and the flag's message show the flags were checked first."""
    command = [sys.executable, str(SCRIPT), "--epochs", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--epochs: 0 is not 1 or more" in done.stderr
    assert "RANK" not in done.stderr
