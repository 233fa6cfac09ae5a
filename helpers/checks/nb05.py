"""Checks for the exercises of ``05_distributed_data_parallel``.

None of them takes a device; each runs the learner's function on ``Machine.cpu()`` of
``helpers.checks.harness``, where a GPU is said to exist but using it is refused, so that a stray
``"cuda"`` gives the same message on every machine.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.distributed.run import get_args_parser
from torch.utils.data import DistributedSampler

from helpers.checks import fail
from helpers.checks.harness import Machine, describe, exercise, short

__all__ = ["check_launch_args", "check_orders_for_epochs", "check_shard_indices"]


def _machine(fix: str) -> Machine:
    m = Machine.cpu()
    m.cuda_fix = fix
    return m


def _ints(value: Any) -> list[int] | None:
    """``value`` as a list of ints, if it is a sequence of integers (a list, tuple, range, array, tensor)."""
    if isinstance(value, torch.Tensor):
        if value.ndim != 1 or value.is_floating_point() or value.is_meta:
            return None
        value = value.tolist()
    elif isinstance(value, np.ndarray):
        if value.ndim != 1 or not np.issubdtype(value.dtype, np.integer):
            return None
        value = value.tolist()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple | range):
        return None
    out = []
    for item in value:
        if isinstance(item, torch.Tensor) and item.numel() == 1 and not item.is_floating_point():
            item = item.item()
        if isinstance(item, bool) or not isinstance(item, int | np.integer):
            return None
        out.append(int(item))
    return out


@exercise(
    "write shard_indices(n, world_size, rank) so that it returns the list of indices that "
    "an unshuffled DistributedSampler gives that rank"
)
def check_shard_indices(shard_indices: Callable) -> str:
    """Exercise 1: the indices DistributedSampler(shuffle=False) gives each rank, padding included."""
    m = _machine("compute the indices with Python alone")
    for n, world_size in ((10, 3), (8, 2), (5, 4), (3, 4), (2, 5), (1, 3)):
        for rank in range(world_size):
            expected = list(DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False))
            answer = m.run(shard_indices, n, world_size, rank)
            case = f"n={n}, world_size={world_size}, rank={rank}"
            if answer is None:
                fail(f"for {case} shard_indices returned None", "return the list of indices")
            got = _ints(answer)
            if got is None:
                fail(f"for {case} shard_indices returned {describe(answer)}", "return a list of ints")
            if got == expected:
                continue
            if len(got) != len(expected):
                fail(
                    f"for {case} there are {len(got)} indices, but each rank gets ceil(n / world_size) = "
                    f"{len(expected)}",
                    "pad by repeating the first indices, from the start again if they run out",
                )
            padding = [p for p in range(len(expected)) if rank + p * world_size >= n]
            if padding and all(got[p] == expected[p] for p in range(len(expected)) if p not in padding):
                fail(
                    f"for {case} the padding is {short([got[p] for p in padding], 30)}, not "
                    f"{short([expected[p] for p in padding], 30)}",
                    "pad with the first indices, 0, 1, 2, ..., from the start again if they run out",
                )
            if sorted(got) == sorted(expected):
                fail(
                    f"for {case} the indices are right but in another order, {short(got, 40)}",
                    "keep the order in which the sampler deals them",
                )
            fail(
                f"for {case} the indices should be {short(expected, 40)}, not {short(got, 40)}",
                "deal them out in turn (rank r gets r, r + world_size, r + 2 * world_size, ...)",
            )
    return "each rank's share, padding included, as DistributedSampler deals it"


def _sampler() -> DistributedSampler:
    return DistributedSampler(range(20), num_replicas=2, rank=1, shuffle=True, seed=0)


def _orders(first_epoch: int, epochs: int) -> list[list[int]]:
    orders = []
    for epoch in range(first_epoch, first_epoch + epochs):
        reference = _sampler()
        reference.set_epoch(epoch)
        orders.append(list(reference))
    return orders


@exercise(
    "write orders_for_epochs(sampler, epochs) so that it returns, for each epoch, the list of indices "
    "that sampler yields in that epoch"
)
def check_orders_for_epochs(orders_for_epochs: Callable) -> str:
    """Exercise 2: a new shuffle each epoch, via sampler.set_epoch(epoch), epochs counted from 0."""
    m = _machine("use the sampler alone")
    answer = m.run(orders_for_epochs, _sampler(), 3, consume=100)
    if answer is None:
        fail("orders_for_epochs returned None", "return one list of indices per epoch")
    orders = [_ints(order) for order in answer] if isinstance(answer, list | tuple) else None
    if orders is None or any(order is None for order in orders):
        fail(
            f"orders_for_epochs returned {describe(answer)}", "return a list with one list of ints per epoch"
        )
    if len(orders) != 3:
        fail(f"orders_for_epochs(sampler, 3) returned {len(orders)} order(s)", "return one per epoch, 3")
    if orders == _orders(0, 3):
        return "set_epoch gives each epoch its own shuffle, the same on every rank"
    if orders[0] == orders[1] == orders[2]:
        fail(
            "every epoch has the same order",
            "call sampler.set_epoch(epoch) with the epoch's number at the start of each epoch",
        )
    if orders == _orders(1, 3):
        fail("the orders are those of epochs 1, 2 and 3", "number the epochs from 0, as range(epochs) does")
    epoch = next(e for e in range(3) if orders[e] != _orders(e, 1)[0])
    fail(
        f"the order of epoch {epoch} is not what the sampler yields after set_epoch({epoch})",
        "for each epoch, call set_epoch(epoch), then list the sampler's indices",
    )
    return ""  # not reached


def _parse(arguments: list[str]) -> Any:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return get_args_parser().parse_args(list(arguments))
        except SystemExit:
            return None


def _nnodes(value: Any, expected: int) -> bool:
    return str(value) in {str(expected), f"{expected}:{expected}"}


def _arguments(answer: Any) -> list[str]:
    if answer is None:
        fail("launch_args returned None", "return the list of arguments")
    if isinstance(answer, str):
        fail(
            "launch_args returned one string",
            "return a list of strings, one per argument (e.g. line.split())",
        )
    if not isinstance(answer, list | tuple):
        fail(f"launch_args returned {describe(answer)}", "return a list of strings, one per argument")
    kinds = sorted({type(part).__name__ for part in answer if not isinstance(part, str)})
    if kinds:
        fail(
            f"some arguments are not strings but {', '.join(kinds)}",
            "make each one a string, e.g. f'--nnodes={nnodes}'",
        )
    if answer and answer[0] == "torchrun":
        fail("the list starts with the word 'torchrun'", "return only its arguments")
    if "--standalone" in answer:
        fail(
            "--standalone is for one machine (it makes up its own rendezvous)", "drop it for several machines"
        )
    return list(answer)


@exercise(
    "write launch_args(nnodes, gpus_per_node, endpoint, job_id) so that it returns the torchrun arguments, "
    "a list of strings, that every machine runs"
)
def check_launch_args(launch_args: Callable) -> str:
    """Exercise 3: torchrun arguments for one of several machines, with the c10d rendezvous."""
    m = _machine("only build the list of arguments")
    answer = _arguments(m.run(launch_args, 2, 4, "10.0.0.1:29400", "cifar"))
    parsed = _parse(answer)
    if parsed is None:
        fail(
            f"torchrun cannot parse these arguments: {short(' '.join(answer), 80)}",
            "use torchrun's own options",
        )
    if parsed.module or Path(parsed.training_script).name != "ddp_train.py":
        fail("the arguments do not end with the script ddp_train.py", "end with 'ddp_train.py'")
    problems = []
    if not _nnodes(parsed.nnodes, 2):
        problems.append(f"--nnodes is {short(parsed.nnodes, 10)}, not 2")
    if str(parsed.nproc_per_node) not in {"4", "gpu"}:
        problems.append(f"--nproc-per-node is {short(parsed.nproc_per_node, 10)}, not 4")
    if parsed.rdzv_backend != "c10d":
        problems.append(f"--rdzv-backend is {short(parsed.rdzv_backend, 10)}, not c10d")
    if parsed.rdzv_endpoint != "10.0.0.1:29400":
        problems.append(f"--rdzv-endpoint is {short(repr(parsed.rdzv_endpoint), 20)}, not the endpoint")
    if parsed.rdzv_id != "cifar":
        problems.append(f"--rdzv-id is {short(repr(parsed.rdzv_id), 20)}, not the job's id")
    if problems:
        fail("; ".join(problems[:2]), "set each from the function's arguments")
    again = _parse(_arguments(m.run(launch_args, 3, 8, "node0:1234", "run7")))
    got = (
        None if again is None else (again.nproc_per_node in {"8", "gpu"}, again.rdzv_endpoint, again.rdzv_id)
    )
    if again is None or not _nnodes(again.nnodes, 3) or got != (True, "node0:1234", "run7"):
        fail(
            "the arguments do not follow the inputs",
            "build them from nnodes, gpus_per_node, endpoint and job_id",
        )
    return "torchrun reads these as one of 2 machines with 4 processes each, meeting at the endpoint"
