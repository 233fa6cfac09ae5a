"""The checks of 05_distributed_data_parallel accept the reference solutions and reject wrong answers."""

import pytest

from helpers.checks import CheckFailed, nb05
from solutions import nb05 as solution


def contiguous(n, world_size, rank):
    size = -(-n // world_size)
    return list(range(n))[rank * size : (rank + 1) * size]


def interleaved_without_padding(n, world_size, rank):
    return list(range(rank, n, world_size))


def reversed_order(n, world_size, rank):
    return list(reversed(solution.shard_indices(n, world_size, rank)))


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (interleaved_without_padding, "repeats the first indices to pad"),
        (contiguous, "deals the indices out in turn"),
        (reversed_order, "wrong order"),
        (lambda n, w, r: "0,3,6,9", "list of ints"),
    ],
)
def test_wrong_shards_are_rejected(answer, message):
    with pytest.raises(CheckFailed, match=message):
        nb05.check_shard_indices(answer)


def forgot_set_epoch(sampler, epochs):
    return [list(sampler) for _ in range(epochs)]


def set_epoch_from_one(sampler, epochs):
    orders = []
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (forgot_set_epoch, "same order: call sampler.set_epoch"),
        (set_epoch_from_one, "counting from 0"),
        (lambda sampler, epochs: [list(sampler)], "asked for 3 epochs"),
    ],
)
def test_wrong_epoch_orders_are_rejected(answer, message):
    with pytest.raises(CheckFailed, match=message):
        nb05.check_orders_for_epochs(answer)


def _args(transform):
    def answer(nnodes, gpus_per_node, endpoint, job_id):
        return transform(solution.launch_args(nnodes, gpus_per_node, endpoint, job_id))

    return answer


def _without(prefix):
    return _args(lambda a: [x for x in a if not x.startswith(prefix)])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_args(lambda a: ["--standalone", *a]), "--standalone is for one machine"),
        (_args(lambda a: [*a[:-2], "helpers/ddp.py"]), "as a module"),
        (_args(lambda a: " ".join(a)), "not one string"),
        (_args(lambda a: ["torchrun", *a]), "leave out the word 'torchrun'"),
        (_without("--rdzv-id"), "rdzv-id should be the job's id"),
        (_without("--rdzv-backend"), "should be c10d"),
        (_without("--nproc-per-node"), "nproc-per-node should be 4"),
        (
            lambda nnodes, gpus, endpoint, job: solution.launch_args(2, 4, "10.0.0.1:29400", "cifar"),
            "ignore the inputs",
        ),
    ],
)
def test_wrong_launch_lines_are_rejected(answer, message):
    with pytest.raises(CheckFailed, match=message):
        nb05.check_launch_args(answer)
