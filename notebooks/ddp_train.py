"""Train CifarNet on CIFAR-10 with DistributedDataParallel: the script every torchrun process runs.

Notebook 05 reads it part by part. On one machine, launch it with

    torchrun --standalone --nproc-per-node=2 ddp_train.py --epochs 2

torchrun starts the processes and gives each one RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT in its environment. The same file runs on a laptop (Gloo, processes on
the CPU), on one GPU or on eight (NCCL, one process per GPU), and on several machines.
"""

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import transforms

from helpers.data import load_cifar10, loader_workers
from helpers.models import CifarNet


def setup():
    """Read who this process is from torchrun's variables, pick its device, join the group."""
    if "RANK" not in os.environ:
        sys.exit(
            "ddp_train.py runs under torchrun, which sets RANK, LOCAL_RANK and WORLD_SIZE for each "
            "process. Launch it with: torchrun --standalone --nproc-per-node=2 ddp_train.py"
        )
    rank = int(os.environ["RANK"])  # among all processes, on all machines
    local_rank = int(os.environ["LOCAL_RANK"])  # on this machine: which GPU to take
    world_size = int(os.environ["WORLD_SIZE"])
    local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
    if torch.cuda.is_available() and torch.cuda.device_count() >= local_world_size:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)  # from here on, "cuda" and NCCL mean this process's GPU
    else:
        device = torch.device("cpu")  # no GPU of its own: every process on the CPU
    backend = dist.get_default_backend_for_device(device)  # "nccl" for cuda, "gloo" for cpu
    # Blocks until all world_size processes have joined. A collective that waits longer than the
    # default timeout (Gloo 30 minutes, NCCL 10 minutes) raises an error; timeout= changes it.
    dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    return {
        "rank": rank,
        "world_size": world_size,
        "local_world_size": local_world_size,
        "device": device,
        "backend": backend,
    }


def load_data(args, rank):
    """The training and test sets; rank 0 loads (and, online, downloads) first, then the others."""
    normalize = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)]
    )
    if rank != 0:
        dist.barrier()  # wait until rank 0 has the files on disk
    quiet = contextlib.nullcontext() if rank == 0 else contextlib.redirect_stdout(io.StringIO())
    with quiet:  # rank 0 has said which dataset it is
        trainset = load_cifar10(train=True, transform=normalize, size=args.train_size)
        testset = load_cifar10(train=False, transform=normalize, size=args.test_size)
    if rank == 0:
        dist.barrier()  # let the others read
    return trainset, testset


def test_accuracy(model, loader, device):
    """The accuracy of a plain (not DDP) model on the test set: rank 0 alone runs it."""
    model.eval()
    right = 0
    with torch.no_grad():
        for images, targets in loader:
            right += (model(images.to(device)).argmax(1).cpu() == targets).sum().item()
    return right / len(loader.dataset)


def save(path, model, epochs_done, history, *, world_size, backend):
    """Rank 0 writes the plain model's weights (no "module." prefix), via a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    state = {"model": model.state_dict(), "epoch": epochs_done, "history": history}
    torch.save({**state, "world_size": world_size, "backend": backend}, temporary)
    os.replace(temporary, path)  # a crash while writing leaves the previous file whole


def train(args, *, rank, world_size, local_world_size, device, backend):
    def log(message):
        if rank == 0:  # one voice: every rank computes the same things
            print(message, flush=True)

    trainset, testset = load_data(args, rank)
    sampler = DistributedSampler(trainset, shuffle=True, seed=0)  # this rank's share of the data
    workers = loader_workers(device, processes=local_world_size)
    pinned = device.type == "cuda"
    loader = DataLoader(
        trainset, args.batch_size, sampler=sampler, num_workers=workers, pin_memory=pinned
    )
    testloader = DataLoader(testset, batch_size=256, num_workers=workers, pin_memory=pinned)

    torch.manual_seed(0)
    model = CifarNet().to(device)
    # DDP copies rank 0's weights to every rank now, and averages the gradients in each backward
    ddp_model = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    global_batch = args.batch_size * world_size
    lr = 0.01 * global_batch / 64  # 0.01 for every 64 images of the global batch
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    log(
        f"world size {world_size} ({local_world_size} on this machine), backend {backend}, "
        f"rank 0 on {device}; batch {args.batch_size} per process, {global_batch} per step in all; "
        f"lr {lr:g}"
    )

    history = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same one on every rank
        ddp_model.train()
        start = time.perf_counter()
        totals = torch.zeros(3, device=device)  # loss sum, right answers, images: this rank's share
        for step, (images, targets) in enumerate(loader):
            if args.max_steps is not None and step >= args.max_steps:
                break
            images = images.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            outputs = ddp_model(images)
            loss = criterion(outputs, targets)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here: every rank gets their average
            optimizer.step()  # the same step on every rank: the weights stay identical
            totals[0] += loss.detach() * len(targets)
            totals[1] += (outputs.argmax(1) == targets).sum()
            totals[2] += len(targets)
        dist.all_reduce(totals)  # sum over the ranks: the metrics of the whole epoch
        loss_sum, right, seen = totals.tolist()
        seconds = time.perf_counter() - start
        if rank == 0:
            # the plain model: ddp_model's forward may call a collective the others never join
            accuracy = test_accuracy(model, testloader, device)
            epochs_done = epoch + 1  # a checkpoint's "epoch": the epochs done, as in notebook 03
            history.append(
                {"epoch": epochs_done, "train_loss": loss_sum / seen, "test_accuracy": accuracy}
            )
            save(args.out, model, epochs_done, history, world_size=world_size, backend=backend)
            log(
                f"epoch {epochs_done}: {int(seen):,} images in {seconds:.1f} s, train loss "
                f"{loss_sum / seen:.3f}, train accuracy {right / seen:.1%}, "
                f"test accuracy {accuracy:.1%}"
            )
        dist.barrier()  # the others wait while rank 0 evaluates and saves

    # Every rank sends its weights to every other (all_gather); rank 0 compares them with its own
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    copies = [torch.empty_like(weights) for _ in range(world_size)]
    dist.all_gather(copies, weights)
    for other, copy in enumerate(copies):
        difference = (copy - copies[0]).abs().max().item()
        log(f"rank {other}/{world_size}: largest weight difference from rank 0 = {difference}")
    log(f"saved {args.out}")
    dist.barrier()  # every rank is done with the collectives before any leaves the group


def positive_int(text):
    """A flag's value: a whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def parse_args():
    parser = argparse.ArgumentParser(description="Train CifarNet with DistributedDataParallel.")
    parser.add_argument("--epochs", type=positive_int, default=2)
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=32,
        help="per process; N processes take N times it",
    )
    parser.add_argument("--train-size", type=positive_int, help="first images of the training set")
    parser.add_argument("--test-size", type=positive_int, help="first images of the test set")
    parser.add_argument("--max-steps", type=positive_int, help="at most this many steps per epoch")
    parser.add_argument("--out", default="checkpoints/ddp.pt", help="the file rank 0 saves")
    args = parser.parse_args()
    folder_named = args.out.endswith(("/", os.sep))
    args.out = Path(args.out)
    if folder_named or args.out.is_dir():
        parser.error(f"--out {args.out} is a folder: give a file, e.g. {args.out / 'ddp.pt'}")
    for folder in args.out.parents:
        if folder.exists() and not folder.is_dir():
            parser.error(f"--out {args.out}: {folder} is a file, not a folder")
    return args


def main():
    args = parse_args()  # before joining the group: a wrong flag stops every rank at once
    process = setup()  # rank, world_size, local_world_size, device and backend
    try:
        train(args, **process)
    finally:
        dist.destroy_process_group()  # leave the group, also when training failed


if __name__ == "__main__":
    main()
