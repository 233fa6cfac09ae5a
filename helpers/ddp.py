"""Train a CIFAR-10 convnet with DistributedDataParallel: one process per GPU, or several on a CPU.

Introduced in ``05_distributed_data_parallel``. ``torchrun`` starts the processes and gives each
one its ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and the address of the rendezvous; this module is
the script every process runs::

    torchrun --standalone --nproc_per_node=2 -m helpers.ddp --epochs 2 --out checkpoints/ddp.pt

The same command runs on a laptop (Gloo, processes on the CPU), on one GPU and on eight (NCCL, one
process per GPU): the backend is chosen from what the machine has. For several machines only the
launch line changes (``--nnodes``, ``--node-rank``, ``--rdzv-endpoint``), not this script.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from queue import Empty, Queue

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import transforms

from helpers.checkpoint import gather_rng_states, save_checkpoint
from helpers.data import SyntheticCIFAR10, load_cifar10, loader_workers
from helpers.models import CifarNet, Tudui

__all__ = [
    "BASE_BATCH",
    "BASE_LR",
    "MODELS",
    "Context",
    "TrainingFailed",
    "choose_backend",
    "launch",
    "main",
    "max_weight_difference",
    "scaled_lr",
    "setup",
]

MODELS: dict[str, type[nn.Module]] = {"cifarnet": CifarNet, "tudui": Tudui}
# How long a rank waits for the others at a collective (the default is 10 minutes): long enough for
# rank 0 to download CIFAR-10 or to evaluate and save while the others wait at a barrier.
COLLECTIVE_TIMEOUT = timedelta(minutes=30)
# The learning rate is chosen for the global batch (per-process batch x world size): BASE_LR for every
# BASE_BATCH images, the linear scaling rule (Goyal et al., 2017). lr 0.01 with momentum 0.9 at batch
# 64 is the recipe of 03; a fixed learning rate too large for the global batch diverges.
BASE_LR = 0.01
BASE_BATCH = 64
CHANCE = 0.1  # ten classes
TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class Context:
    """Who this process is: its rank among all processes and on this machine, its device, the backend."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    device: torch.device
    backend: str


def choose_backend(local_world_size: int) -> tuple[str, str]:
    """NCCL on the GPUs when each process on this machine can have one of its own, else Gloo on the CPU.

    The backend is PyTorch's default for the device (``get_default_backend_for_device``, PyTorch 2.6
    and later: NCCL for ``cuda``, Gloo for ``cpu``); an older PyTorch gets the same two by name.
    """
    own_gpu = torch.cuda.is_available() and torch.cuda.device_count() >= local_world_size
    device_type = "cuda" if own_gpu else "cpu"
    default_backend = getattr(dist, "get_default_backend_for_device", None)
    if default_backend is not None:
        return default_backend(device_type), device_type
    return {"cuda": "nccl", "cpu": "gloo"}[device_type], device_type


def setup() -> Context:
    """Join the process group that ``torchrun`` set up, on the backend that suits this machine."""
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise RuntimeError(
            f"helpers.ddp runs inside torchrun, which sets {', '.join(missing)} for each process; "
            "these are missing. Launch it with: torchrun --standalone --nproc_per_node=2 -m helpers.ddp"
        )
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size, local_world_size = int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_WORLD_SIZE"])
    backend, device_type = choose_backend(local_world_size)
    if device_type == "cuda":
        device = torch.device("cuda", local_rank)
        # this process's GPU: "cuda" and NCCL mean this one from here on
        if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "set_device_index"):
            torch.accelerator.set_device_index(local_rank)  # PyTorch 2.6 and later, any accelerator
        else:
            torch.cuda.set_device(device)
        dist.init_process_group(backend, device_id=device, timeout=COLLECTIVE_TIMEOUT)
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend, timeout=COLLECTIVE_TIMEOUT)
    return Context(rank, local_rank, world_size, local_world_size, device, backend)


class TrainingFailed(RuntimeError):
    """Training diverged or learned nothing: stopped, and the epoch's checkpoint not saved."""


def scaled_lr(global_batch: int, base_lr: float = BASE_LR, base_batch: int = BASE_BATCH) -> float:
    """The learning rate for a global batch: ``base_lr`` per ``base_batch`` images, scaled linearly.

    Two processes with batch 32 each take the step of one batch of 64 (their gradients are
    averaged), so they get the learning rate of batch 64. Linear scaling holds up to a few thousand
    images per batch for convnets like these, with a warm-up (see ``_train``); far beyond, it breaks.
    """
    if global_batch < 1:
        raise ValueError(f"global_batch must be at least 1, got {global_batch}")
    return base_lr * global_batch / base_batch


def max_weight_difference(model: nn.Module) -> float:
    """The largest difference between this rank's parameters and rank 0's; every rank must call it."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return max((other - gathered[0]).abs().max().item() for other in gathered)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchrun --standalone --nproc_per_node=N -m helpers.ddp",
        description="Train a CIFAR-10 convnet with DistributedDataParallel: one process per GPU, or on CPUs.",
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="cifarnet")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument(
        "--batch-size", type=int, default=64, help="per process: the global batch is N times this"
    )
    parser.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"learning rate (default: {BASE_LR} per {BASE_BATCH} images of the global batch, with a warm-up "
        f"over the first epoch when that is more than {BASE_LR})",
    )
    parser.add_argument(
        "--min-accuracy",
        type=float,
        default=1.5 * CHANCE,
        help="stop with an error when the test accuracy after the second epoch or later is below this "
        "(default 1.5 x chance; 0 turns the check off, e.g. for runs of a few steps)",
    )
    parser.add_argument(
        "--train-size", type=int, default=None, help="first images of the training set (default all)"
    )
    parser.add_argument(
        "--test-size", type=int, default=None, help="first images of the test set (default all)"
    )
    parser.add_argument("--max-steps", type=int, default=None, help="stop each epoch after this many steps")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="DataLoader worker processes per rank (default: helpers.data.loader_workers, which shares "
        "this machine's cores between its ranks on GPUs, and gives 0 on CPUs)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-shuffle", action="store_true", help="keep the data in order (for checks)")
    parser.add_argument(
        "--out", type=Path, default=Path("checkpoints/ddp.pt"), help="checkpoint rank 0 writes"
    )
    parser.add_argument("--dump-weights", type=Path, default=None, help="every rank writes its weights here")
    return parser


def _load_data(train: bool, size: int | None, ctx: Context):
    normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    # Rank 0 first (it downloads CIFAR-10 when needed), then the others read what it wrote: N processes
    # downloading into one folder at once would trip over each other's half-written files. Rank 0 also
    # tells the others which data it got, so that no rank trains on the stand-in while another has CIFAR-10.
    source = [None]
    if ctx.rank == 0:
        dataset = load_cifar10(train=train, transform=normalize, size=size)
        source = ["synthetic" if isinstance(dataset, SyntheticCIFAR10) else "cifar10"]
    dist.broadcast_object_list(source, src=0)  # the others wait here while rank 0 loads
    if ctx.rank != 0:
        with contextlib.redirect_stdout(io.StringIO()):  # rank 0 has said which dataset it is
            dataset = load_cifar10(train=train, transform=normalize, size=size, source=source[0])
    return dataset


def _say(line: str) -> None:
    """Print ``line`` in one write, so that the lines of ranks sharing one pipe never run together.

    ``print`` writes the text and its newline separately when Python runs unbuffered
    (``PYTHONUNBUFFERED=1``, as on many CI machines and containers), so two ranks printing at
    once could give ``rank 0: ...rank 1: ...`` on one line. One write of a short line to a pipe
    is atomic.
    """
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _train(args: argparse.Namespace, ctx: Context) -> None:
    def log(message: str) -> None:
        if ctx.rank == 0:  # one voice: the other ranks compute the same things
            _say(message)

    global_batch = args.batch_size * ctx.world_size
    lr = args.lr if args.lr is not None else scaled_lr(global_batch)
    how = (
        "as given"
        if args.lr is not None
        else f"{BASE_LR} per {BASE_BATCH} images, scaled to the global batch"
    )
    # On GPUs, worker processes build the next batches (PIL image, ToTensor, Normalize) while the GPU
    # trains; without them the GPU waits for each batch
    workers = (
        args.workers
        if args.workers is not None
        else loader_workers(ctx.device, processes=ctx.local_world_size)
    )
    log(
        f"world size {ctx.world_size} ({ctx.local_world_size} on this machine), backend {ctx.backend}, "
        f"rank 0 on {ctx.device}; batch {args.batch_size} per process, "
        f"{global_batch} per step in all; lr {lr:g} ({how}); {workers} loader worker(s) per process"
    )
    trainset = _load_data(True, args.train_size, ctx)
    testset = _load_data(False, args.test_size, ctx)
    sampler = DistributedSampler(trainset, shuffle=not args.no_shuffle, seed=args.seed)
    pinned = ctx.device.type == "cuda"
    loader = DataLoader(
        trainset, batch_size=args.batch_size, sampler=sampler, num_workers=workers, pin_memory=pinned
    )
    testloader = DataLoader(testset, batch_size=256, num_workers=workers, pin_memory=pinned)

    torch.manual_seed(args.seed)  # the same start everywhere (DDP also copies rank 0's weights to all)
    model = MODELS[args.model]().to(ctx.device)
    ddp_model = DistributedDataParallel(
        model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None
    )
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr, momentum=0.9)
    # A learning rate scaled up for a large batch starts with a warm-up: from BASE_LR's share to the
    # full rate over the first epoch's steps, so that the first, largest gradients do not blow it up.
    warmup = len(loader) if args.lr is None and lr > BASE_LR else 0
    warmup_from = BASE_LR / lr if warmup else 1.0
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, warmup_from + (1.0 - warmup_from) * step / warmup) if warmup else 1.0
    )

    history = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        ddp_model.train()
        start = time.perf_counter()
        totals = torch.zeros(3, device=ctx.device)  # loss sum, correct, seen: on this rank's share
        for step, (images, targets) in enumerate(loader):
            if args.max_steps is not None and step >= args.max_steps:
                break
            images = images.to(ctx.device, non_blocking=True)
            targets = targets.to(ctx.device, non_blocking=True)
            outputs = ddp_model(images)
            loss = criterion(outputs, targets)
            optimizer.zero_grad()
            loss.backward()  # DDP averages the gradients over all ranks here
            optimizer.step()
            scheduler.step()
            totals[0] += loss.detach() * len(targets)
            totals[1] += (outputs.argmax(1) == targets).sum()
            totals[2] += len(targets)
        dist.all_reduce(totals)  # the metrics of the whole epoch, not of rank 0's share
        loss_sum, correct, seen = totals.tolist()  # waits for the GPU: only now is the epoch done
        seconds = time.perf_counter() - start
        record = {"epoch": epoch, "train_loss": loss_sum / seen, "train_accuracy": correct / seen}
        if not math.isfinite(record["train_loss"]):  # every rank has the same all-reduced sum
            raise TrainingFailed(
                f"epoch {epoch + 1}: the training loss became {record['train_loss']} (not a number): "
                f"training diverged at lr {lr:g}. Lower the learning rate (--lr); nothing was saved."
            )
        rng_states = gather_rng_states()  # each rank's random state, for an exact resume (a collective)
        verdict = [None]
        if ctx.rank == 0:
            model.eval()
            right = 0
            with torch.no_grad():
                for images, targets in testloader:
                    right += (model(images.to(ctx.device)).argmax(1).cpu() == targets).sum().item()
            record["test_accuracy"] = right / len(testset)
            history.append(record)
            if epoch >= 1 and record["test_accuracy"] < args.min_accuracy:
                verdict = [
                    f"epoch {epoch + 1}: test accuracy {record['test_accuracy']:.1%}, below --min-accuracy "
                    f"{args.min_accuracy:.0%} (chance is {CHANCE:.0%}), train loss "
                    f"{record['train_loss']:.3f} (ln 10 = 2.303 is a model that gives every class the same "
                    "score): it learned nothing "
                    f"or diverged at lr {lr:g}. Lower the learning rate (--lr) or train longer; this "
                    "epoch's checkpoint was not saved."
                ]
            else:
                extra = {"history": history, "world_size": ctx.world_size, "backend": ctx.backend, "lr": lr}
                extra["model_name"] = args.model
                save_checkpoint(args.out, ddp_model, optimizer, epoch, rng_state=rng_states, **extra)
                log(
                    f"epoch {epoch + 1}: {int(seen):,} images in {seconds:.1f} s ({seen / seconds:,.0f}/s), "
                    f"train loss {record['train_loss']:.3f}, test accuracy {record['test_accuracy']:.1%}; "
                    f"saved {args.out}"
                )
        dist.broadcast_object_list(verdict, src=0)  # every rank stops, or none
        if verdict[0] is not None:
            raise TrainingFailed(verdict[0])
        dist.barrier()  # the others wait while rank 0 evaluates and saves

    difference = max_weight_difference(ddp_model)
    _say(f"rank {ctx.rank}/{ctx.world_size}: largest weight difference from rank 0 = {difference}")
    if args.dump_weights is not None:
        args.dump_weights.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.dump_weights / f"rank{ctx.rank}.pt")
    if difference != 0:
        raise RuntimeError(f"rank {ctx.rank}: the replicas drifted apart (difference {difference})")


def _stop(process: subprocess.Popen) -> None:
    """Stop torchrun so that it stops its workers (SIGTERM; SIGKILL if it does not end in 30 s)."""
    process.terminate()  # torchrun's agent turns SIGTERM into stopping every worker it started
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _argument_list(values: object, name: str, example: str) -> list[str]:
    """``values`` as command-line words: a list or tuple of strings, numbers and paths, not one string."""
    from helpers import _args

    if isinstance(values, str | bytes):
        raise TypeError(
            f"launch: {name} is one string, {_args.shown(values)}, which would be split into characters; "
            f"give a list of words, e.g. {example}, or shlex.split({_args.shown(values)})."
        )
    if not isinstance(values, list | tuple):
        raise TypeError(
            f"launch: {name} must be a list of words, e.g. {example}; got {type(values).__name__}."
        )
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, str | int | float | os.PathLike):
            raise TypeError(
                f"launch: {name}[{index}] is {_args.shown(value)}; each word must be a string, a number or a "
                "path (leave out an option that has no value)."
            )
    return [os.fspath(value) if isinstance(value, os.PathLike) else str(value) for value in values]


def launch(
    script_args: Sequence[object] = (),
    *,
    nproc: int,
    launcher_args: Sequence[str] = ("--standalone",),
    env: dict[str, str] | None = None,
    timeout: float = 1800,
    echo: bool = True,
) -> str:
    """Run ``torchrun ... -m helpers.ddp <script_args>`` with ``nproc`` processes here; return its output.

    ``torchrun`` is run as ``python -m torch.distributed.run`` (the same program) with this Python,
    so it works from a notebook whose kernel is not on ``PATH``. The output (both streams) is printed
    line by line as it comes when ``echo`` is true. A failed run raises ``RuntimeError`` with the
    end of the output, which holds the failing rank's traceback. Introduced in
    ``05_distributed_data_parallel``.
    """
    from collections.abc import Mapping  # imported here, as _args: so that this branch changes launch() only

    from helpers import _args

    nproc = _args.integer(
        nproc, "nproc", "launch", minimum=1, meaning="the number of processes to start here"
    )
    script_args = _argument_list(script_args, "script_args", "['--epochs', 2, '--out', 'checkpoints/ddp.pt']")
    launcher_args = _argument_list(launcher_args, "launcher_args", "['--standalone']")
    if env is not None and not (
        isinstance(env, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise TypeError(
            "launch: env must map variable names to strings, e.g. {'CUDA_VISIBLE_DEVICES': '0,1'}; "
            f"got {_args.shown(env)}. Write numbers as strings: '1', not 1."
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"launch: timeout must be a number of seconds above 0, got {_args.shown(timeout)}.")
    echo = _args.boolean(echo, "echo", "launch", meaning="whether to print the output as it comes")
    args = [f"--nproc-per-node={nproc}", *launcher_args, "-m", "helpers.ddp", *script_args]
    if echo:
        print("$ torchrun " + shlex.join(args), flush=True)
    # torchrun sets OMP_NUM_THREADS=1 (with a warning) when it is unset; share the cores out instead
    threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc))}
    process = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *args],
        env={**threads, **os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    queue: Queue[str | None] = Queue()

    def read() -> None:  # in a thread, so that a silent hang still times out
        assert process.stdout is not None
        for line in process.stdout:
            queue.put(line)
        queue.put(None)  # the end of the output: every process writing to it has exited

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(process.args, timeout)
            try:
                line = queue.get(timeout=min(remaining, 1.0))
            except Empty:
                continue
            if line is None:
                break
            lines.append(line)
            if echo:
                print(line, end="", flush=True)  # from this thread: Jupyter shows it in the cell
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _stop(process)
        raise RuntimeError(
            f"torchrun ran longer than {timeout:.0f} s and was stopped; the end of its output:\n"
            f"{''.join(lines)[-4000:]}"
        ) from None
    except BaseException:  # e.g. KeyboardInterrupt from Jupyter's stop button
        _stop(process)
        raise
    output = "".join(lines)
    if process.returncode != 0:
        raise RuntimeError(
            f"torchrun exited with {process.returncode}; the end of its output:\n{output[-4000:]}"
        )
    return output


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 0:
        parser.error(f"--workers must be 0 or more (0: no worker processes), got {args.workers}")
    try:
        ctx = setup()
    except RuntimeError as error:
        sys.exit(str(error))
    try:
        _train(args, ctx)
    except TrainingFailed as error:
        if ctx.rank == 0:
            _say(f"stopped: {error}")
        sys.exit(1)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
