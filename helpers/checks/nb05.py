"""Checks for the exercises of ``05_distributed_data_parallel``: each runs the function on the CPU."""

from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import torch
from torch.distributed.run import get_args_parser
from torch.utils.data import DistributedSampler

from helpers.checks import fail
from helpers.checks.harness import Forbidden, Machine, describe, exercise, short

__all__ = ["check_launch_args", "check_orders_for_epochs", "check_shard_indices"]


def _ints(value: Any) -> list[int] | None:
    """``value`` as a list of ints, if it is a sequence of integers (a list, tuple, range, array, tensor)."""
    if (
        isinstance(value, torch.Tensor | np.ndarray)
        and value.ndim == 1
        and not getattr(value, "is_meta", 0)
    ):
        value = value.tolist()
    if not isinstance(value, list | tuple | range):
        return None
    items = [
        v.item() if torch.is_tensor(v) and v.numel() == 1 and not v.is_meta else v for v in value
    ]
    ints = all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in items)
    return [int(v) for v in items] if ints else None


def _mistake(got: list[int], expected: list[int], n: int, size: int, rank: int) -> tuple[str, str]:
    """What is wrong with the indices ``got`` of ``rank``, where the sampler gives ``expected``; the fix."""
    case = f"for n={n}, world_size={size}, rank={rank}"
    if len(got) != len(expected):
        mistake = f"{case} there are {len(got)} indices, but each rank gets ceil(n / world_size)"
        return mistake, "pad by repeating the first indices, from the start again if they run out"
    padding = [p for p in range(len(expected)) if rank + p * size >= n]
    if padding and all(got[p] == expected[p] for p in range(len(expected)) if p not in padding):
        pads = short([got[p] for p in padding], 30), short([expected[p] for p in padding], 30)
        return (
            f"{case} the padding is {pads[0]}, not {pads[1]}",
            "pad with the first indices, 0, 1, 2, ...",
        )
    if sorted(got) == sorted(expected):
        return (
            f"{case} the indices {short(got, 40)} are in another order",
            "keep the sampler's order",
        )
    mistake = f"{case} the indices should be {short(expected, 40)}, not {short(got, 40)}"
    return mistake, "deal them out in turn (rank r gets r, r + world_size, r + 2 * world_size, ...)"


def _no_sampler(self: DistributedSampler) -> None:
    raise Forbidden(
        "shard_indices asks DistributedSampler, which the task leaves out", "deal them out yourself"
    )


@exercise(
    "write shard_indices(n, world_size, rank) so that it returns what an unshuffled sampler gives rank"
)
def check_shard_indices(shard_indices: Callable) -> str:
    for n, size in ((10, 3), (8, 2), (5, 4), (3, 4), (2, 5), (1, 3)):
        for rank in range(size):
            expected = list(
                DistributedSampler(range(n), num_replicas=size, rank=rank, shuffle=False)
            )
            with mock.patch.object(DistributedSampler, "__iter__", _no_sampler):
                answer = Machine.cpu().run(shard_indices, n, size, rank)
            if not isinstance(answer, list) or (got := _ints(answer)) is None:
                fail(
                    f"shard_indices returned {short(repr(answer), 50)}",
                    "return a list of ints (.tolist())",
                )
            if got != expected:
                fail(*_mistake(got, expected, n, size, rank))
    return "each rank's share, padding included, as DistributedSampler deals it"


def _sampler(epoch: int = 0) -> DistributedSampler:
    sampler = DistributedSampler(range(20), num_replicas=2, rank=1, shuffle=True, seed=0)
    sampler.set_epoch(epoch)
    return sampler


@exercise(
    "write orders_for_epochs(sampler, epochs) so that it returns what sampler yields in each epoch"
)
def check_orders_for_epochs(orders_for_epochs: Callable) -> str:
    answer = Machine.cpu().run(orders_for_epochs, _sampler(), 3, consume=100)
    orders = [_ints(order) for order in answer] if isinstance(answer, list | tuple) else [None]
    if None in orders:
        fail(f"orders_for_epochs returned {describe(answer)}", "return one list of ints per epoch")
    if len(orders) != 3:
        fail(
            f"orders_for_epochs(sampler, 3) returned {len(orders)} order(s)",
            "return one per epoch, 3",
        )
    if orders[0] == orders[1] == orders[2]:
        fail(
            "every epoch has the same order",
            "call sampler.set_epoch(epoch) at the start of each epoch",
        )
    if orders == [list(_sampler(epoch)) for epoch in (1, 2, 3)]:
        fail(
            "the orders are those of epochs 1, 2 and 3",
            "number the epochs from 0, as range(epochs) does",
        )
    if wrong := [epoch for epoch in range(3) if orders[epoch] != list(_sampler(epoch))]:
        fail(
            f"the order of epoch {wrong[0]} is not the sampler's",
            "call set_epoch(epoch), then list it",
        )
    return "set_epoch gives each epoch its own shuffle, the same on every rank"


def _parse(launch_args: Callable, *inputs: Any) -> Any:
    answer = Machine.cpu().run(launch_args, *inputs)
    if isinstance(answer, str):
        fail(
            "launch_args returned one string",
            "return one string per argument, as line.split() gives",
        )
    if not isinstance(answer, list | tuple):
        fail(
            f"launch_args returned {describe(answer)}", "return a list of strings, one per argument"
        )
    if kinds := sorted({type(part).__name__ for part in answer if not isinstance(part, str)}):
        fail(f"some arguments are {', '.join(kinds)}, not strings", "write each as a string")
    if list(answer[:1]) == ["torchrun"]:
        fail("the list starts with the word 'torchrun'", "return only its arguments")
    if "--standalone" in answer:
        fail(
            "--standalone is for one machine (it makes up a rendezvous)",
            "drop it for several machines",
        )
    parser = get_args_parser()
    parser.error = lambda why: fail(
        f"torchrun says: {short(why, 60)}", "use torchrun's own options"
    )
    return parser.parse_args(list(answer))


def _wrong_settings(parsed: Any, nnodes: int, gpus: int, endpoint: str, job_id: str) -> list[str]:
    """What in the parsed arguments does not say ``nnodes`` machines of ``gpus`` processes each."""
    settings = {
        "nnodes": (parsed.nnodes, f"{nnodes}", f"{nnodes}:{nnodes}"),
        "nproc-per-node": (parsed.nproc_per_node, f"{gpus}", "gpu"),
        "rdzv-backend": (parsed.rdzv_backend, "c10d"),
        "rdzv-endpoint": (parsed.rdzv_endpoint or "unset", endpoint),
        "rdzv-id": (parsed.rdzv_id, job_id),
    }
    return [
        f"--{k} is {got!s:.20}, not {ok[0]}"
        for k, (got, *ok) in settings.items()
        if f"{got}" not in ok
    ]


@exercise(
    "write launch_args(nnodes, gpus_per_node, endpoint, job_id) to return the torchrun arguments"
)
def check_launch_args(launch_args: Callable) -> str:
    parsed = _parse(launch_args, 2, 4, "10.0.0.1:29400", "cifar")
    if parsed.training_script == "python":
        fail(
            "the word python comes before the script",
            "drop it, torchrun runs the script with Python",
        )
    if parsed.module or parsed.training_script.split("/")[-1] != "ddp_train.py":
        fail("the arguments do not end with the script ddp_train.py", "end with 'ddp_train.py'")
    if problems := _wrong_settings(parsed, 2, 4, "10.0.0.1:29400", "cifar"):
        fail("; ".join(problems[:2]), "set each from the function's arguments")
    if _wrong_settings(_parse(launch_args, 3, 8, "node0:1234", "run7"), 3, 8, "node0:1234", "run7"):
        fail(
            "the arguments do not follow the inputs",
            "build them from the function's four arguments",
        )
    return (
        "torchrun reads these as one of 2 machines with 4 processes each, meeting at the endpoint"
    )
