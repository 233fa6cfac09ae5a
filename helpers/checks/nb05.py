"""Checks for the exercises of ``05_distributed_data_parallel``."""

from __future__ import annotations

from collections.abc import Callable

from torch.distributed.run import get_args_parser
from torch.utils.data import DistributedSampler

from helpers.checks import correct, fail, not_answered

__all__ = ["check_launch_args", "check_orders_for_epochs", "check_shard_indices"]


def check_shard_indices(shard_indices: Callable) -> bool:
    """Exercise 1: the indices DistributedSampler(shuffle=False) gives each rank, padding included."""
    if shard_indices(10, 3, 0) is None:
        return not_answered("return the list of indices rank `rank` gets")
    for n, world_size in ((10, 3), (8, 2), (5, 4), (3, 4)):
        for rank in range(world_size):
            expected = list(DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False))
            got = shard_indices(n, world_size, rank)
            try:
                got = [int(i) for i in got]
            except (TypeError, ValueError):
                fail(f"return a list of ints; for n={n}, world_size={world_size}, rank={rank} got {got!r}")
            if got == expected:
                continue
            if len(got) != len(expected):
                fail(
                    f"n={n}, world_size={world_size}: rank {rank} got {len(got)} indices, but each rank gets "
                    f"ceil(n / world_size) = {len(expected)}: the sampler repeats the first indices to pad "
                    f"the last share (expected {expected}, got {got})"
                )
            if sorted(got) == sorted(expected):
                fail(f"rank {rank} has the right indices in the wrong order: expected {expected}, got {got}")
            fail(
                f"n={n}, world_size={world_size}, rank={rank}: expected {expected}, got {got}. The sampler "
                "deals the indices out in turn: rank r gets r, r + world_size, r + 2 * world_size, ..."
            )
    return correct("each rank's share, padding included, as DistributedSampler deals it")


def check_orders_for_epochs(orders_for_epochs: Callable) -> bool:
    """Exercise 2: a new shuffle each epoch, via sampler.set_epoch(epoch)."""
    sampler = DistributedSampler(range(20), num_replicas=2, rank=1, shuffle=True, seed=0)
    answer = orders_for_epochs(sampler, 3)
    if answer is None:
        return not_answered("return one list of indices per epoch")
    try:
        orders = [[int(i) for i in order] for order in answer]
    except (TypeError, ValueError):
        fail(f"return a list with one list of indices per epoch, got {answer!r}")
    if len(orders) != 3:
        fail(f"asked for 3 epochs, got {len(orders)} orders")
    expected = []
    for epoch in range(3):
        reference = DistributedSampler(range(20), num_replicas=2, rank=1, shuffle=True, seed=0)
        reference.set_epoch(epoch)
        expected.append(list(reference))
    if orders[0] == orders[1] == orders[2]:
        fail(
            "every epoch saw the same order: call sampler.set_epoch(epoch) at the start of each epoch, "
            "before iterating over the sampler (or the DataLoader that uses it)"
        )
    if orders != expected:
        fail(
            f"the orders differ from the sampler's: epoch e is list(sampler) after sampler.set_epoch(e), "
            f"counting from 0; expected {expected[0][:4]}... for epoch 0, got {orders[0][:4]}..."
        )
    return correct("set_epoch gives each epoch its own shuffle, the same on every rank")


def check_launch_args(launch_args: Callable) -> bool:
    """Exercise 3: torchrun arguments for one of several machines, with the c10d rendezvous."""
    answer = launch_args(2, 4, "10.0.0.1:29400", "cifar")
    if answer is None:
        return not_answered("return the torchrun arguments as a list of strings")
    if isinstance(answer, str):
        fail("return a list of strings, one per argument (e.g. answer.split()), not one string")
    if not all(isinstance(part, str) for part in answer):
        fail(f"every argument must be a string: got {[type(p).__name__ for p in answer]}")
    if answer and answer[0] == "torchrun":
        fail("leave out the word 'torchrun': return only its arguments")
    if "--standalone" in answer:
        fail("--standalone is for one machine (it makes up its own rendezvous); drop it for several machines")
    try:
        parsed = get_args_parser().parse_args(list(answer))
    except SystemExit:
        fail(f"torchrun cannot parse these arguments: {answer}")
    if not parsed.module or parsed.training_script != "helpers.ddp":
        fail("start the script as a module: end with '-m', 'helpers.ddp' (then its own arguments)")
    problems = []
    if str(parsed.nnodes) != "2":
        problems.append(f"--nnodes should be 2, is {parsed.nnodes}")
    if str(parsed.nproc_per_node) != "4":
        problems.append(f"--nproc-per-node should be 4 (one process per GPU), is {parsed.nproc_per_node}")
    if parsed.rdzv_backend != "c10d":
        problems.append(f"--rdzv-backend should be c10d, is {parsed.rdzv_backend}")
    if parsed.rdzv_endpoint != "10.0.0.1:29400":
        problems.append(f"--rdzv-endpoint should be 10.0.0.1:29400, is {parsed.rdzv_endpoint!r}")
    if parsed.rdzv_id != "cifar":
        problems.append(
            f"--rdzv-id should be the job's id, cifar, the same on every machine; is {parsed.rdzv_id!r}"
        )
    if problems:
        fail("; ".join(problems))
    again = get_args_parser().parse_args(list(launch_args(3, 8, "node0:1234", "run7")))
    got = (str(again.nnodes), str(again.nproc_per_node), again.rdzv_endpoint, again.rdzv_id)
    if got != ("3", "8", "node0:1234", "run7"):
        fail("the arguments ignore the inputs: build them from nnodes, gpus_per_node, endpoint, job_id")
    return correct("torchrun reads these as one of 2 machines with 4 processes each, meeting at the endpoint")
