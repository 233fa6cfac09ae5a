"""helpers.checks.nb05: right answers in other spellings pass, typical mistakes are refused by name."""

import math
import random

import numpy as np
import pytest
import torch
from exercise_answers import right, right_cases, wrong, wrong_cases
from torch.utils.data import DataLoader

from helpers.checks.nb05 import check_launch_args, check_orders_for_epochs, check_shard_indices
from solutions import nb05 as solution

# ---- exercise 1: shard_indices ----


def _modulo(n, world_size, rank):
    return [(rank + i * world_size) % n for i in range(math.ceil(n / world_size))]


def _range_then_modulo(n, world_size, rank):
    total = math.ceil(n / world_size) * world_size
    return [i % n for i in range(rank, total, world_size)]


def _numpy(n, world_size, rank):
    total = -(-n // world_size) * world_size
    return (np.arange(total) % n)[rank::world_size]


def _tensor(n, world_size, rank):
    total = math.ceil(n / world_size) * world_size
    return torch.arange(rank, total, world_size) % n


def _cycle(n, world_size, rank):
    indices = []
    while len(indices) < math.ceil(n / world_size) * world_size:
        indices.extend(range(n))
    return indices[: math.ceil(n / world_size) * world_size][rank::world_size]


def _contiguous(n, world_size, rank):
    size = -(-n // world_size)
    return list(range(n))[rank * size : (rank + 1) * size]


def _no_padding(n, world_size, rank):
    return list(range(rank, n, world_size))


def _reversed(n, world_size, rank):
    return list(reversed(solution.shard_indices(n, world_size, rank)))


def _padded_once(n, world_size, rank):
    total = math.ceil(n / world_size) * world_size
    padded = list(range(n))
    padded += padded[: total - n]  # not enough when the padding is longer than the data
    return padded[rank::world_size]


def _padded_with_zeros(n, world_size, rank):
    total = math.ceil(n / world_size) * world_size
    return (list(range(n)) + [0] * (total - n))[rank::world_size]


def _padded_with_the_last(n, world_size, rank):
    total = math.ceil(n / world_size) * world_size
    return (list(range(n)) + [n - 1] * (total - n))[rank::world_size]


def _drops_the_rest(n, world_size, rank):
    return list(range(n))[: n // world_size * world_size][rank::world_size]


SHARD_RIGHT = {
    "modulo": _modulo,
    "range, then modulo": _range_then_modulo,
    "NumPy array": _numpy,
    "tensor": _tensor,
    "cycle": _cycle,
    "tuple": lambda n, w, r: tuple(solution.shard_indices(n, w, r)),
}

SHARD_WRONG = [
    ("no padding", _no_padding, "pad by repeating the first indices"),
    ("contiguous", _contiguous, "deal them out in turn"),
    ("reversed", _reversed, "in another order"),
    ("a string", lambda n, w, r: "0,3,6,9", "returned the string"),
    ("padded once", _padded_once, "n=2, world_size=5, rank=4 there are 0 indices"),
    ("padded with zeros", _padded_with_zeros, "the padding is [0], not [1]"),
    ("padded with the last", _padded_with_the_last, "the padding is [9], not [0]"),
    ("drops the rest", _drops_the_rest, "there are 3 indices"),
    ("floats", lambda n, w, r: [float(i) for i in solution.shard_indices(n, w, r)], "return a list of ints"),
]


@pytest.mark.parametrize("answer", right_cases(SHARD_RIGHT))
def test_shard_indices_right(answer, capsys):
    right(check_shard_indices, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(SHARD_WRONG))
def test_shard_indices_wrong(answer, fragment):
    wrong(check_shard_indices, answer, fragment)


# ---- exercise 2: orders_for_epochs ----


def _set_epoch_in_a_comprehension(sampler, epochs):
    return [(sampler.set_epoch(epoch), list(sampler))[1] for epoch in range(epochs)]


def _epoch_attribute(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        sampler.epoch = epoch
        orders.append(list(iter(sampler)))
    return orders


def _through_a_data_loader(sampler, epochs):
    loader = DataLoader(range(20), sampler=sampler)
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append([int(batch) for batch in loader])
    return orders


def _batches_of_one(sampler, epochs):
    loader = DataLoader(range(20), sampler=sampler)
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(loader))
    return orders


def _a_generator(sampler, epochs):
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        yield tuple(sampler)


def _forgot_set_epoch(sampler, epochs):
    return [list(sampler) for _ in range(epochs)]


def _set_epoch_from_one(sampler, epochs):
    orders = []
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def _set_epoch_zero(sampler, epochs):
    orders = []
    for _ in range(epochs):
        sampler.set_epoch(0)
        orders.append(list(sampler))
    return orders


def _own_shuffle(sampler, epochs):
    orders = []
    for _ in range(epochs):
        order = list(sampler)
        random.shuffle(order)
        orders.append(order)
    return orders


ORDERS_RIGHT = {
    "in a comprehension": _set_epoch_in_a_comprehension,
    "sampler.epoch": _epoch_attribute,
    "through a DataLoader": _through_a_data_loader,
    "batches of one": _batches_of_one,
    "a generator of tuples": _a_generator,
}

ORDERS_WRONG = [
    ("forgot set_epoch", _forgot_set_epoch, "every epoch has the same order: call sampler.set_epoch(epoch)"),
    ("epochs from 1", _set_epoch_from_one, "number the epochs from 0"),
    ("set_epoch(0)", _set_epoch_zero, "every epoch has the same order"),
    ("own shuffle", _own_shuffle, "the order of epoch 0 is not what the sampler yields"),
    ("one epoch", lambda sampler, epochs: [list(sampler)], "returned 1 order(s)"),
    ("one flat list", lambda sampler, epochs: list(sampler), "returned a list of 10 items"),
    ("the sampler", lambda sampler, epochs: [sampler] * epochs, "returned a list of 3 items"),
]


@pytest.mark.parametrize("answer", right_cases(ORDERS_RIGHT))
def test_orders_for_epochs_right(answer, capsys):
    right(check_orders_for_epochs, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(ORDERS_WRONG))
def test_orders_for_epochs_wrong(answer, fragment):
    wrong(check_orders_for_epochs, answer, fragment)


# ---- exercise 3: launch_args ----


def _args(transform):
    def answer(nnodes, gpus_per_node, endpoint, job_id):
        return transform(solution.launch_args(nnodes, gpus_per_node, endpoint, job_id))

    return answer


def _without(prefix):
    return _args(lambda a: [x for x in a if not x.startswith(prefix)])


def _pairs(nnodes, gpus_per_node, endpoint, job_id):
    return [
        "--nnodes",
        str(nnodes),
        "--nproc_per_node",
        str(gpus_per_node),
        "--rdzv_id",
        job_id,
        "--rdzv_backend",
        "c10d",
        "--rdzv_endpoint",
        endpoint,
        "ddp_train.py",
    ]


def _split(nnodes, gpus_per_node, endpoint, job_id):
    line = (
        f"--nnodes={nnodes}:{nnodes} --nproc-per-node={gpus_per_node} --max-restarts=3 --rdzv-backend=c10d "
        f"--rdzv-endpoint={endpoint} --rdzv-id={job_id} notebooks/ddp_train.py --epochs 2"
    )
    return line.split()


def _static(nnodes, gpus_per_node, endpoint, job_id):
    host, port = endpoint.split(":")
    return [f"--nnodes={nnodes}", f"--nproc-per-node={gpus_per_node}", f"--master-addr={host}"] + [
        f"--master-port={port}",
        "ddp_train.py",
    ]


LAUNCH_RIGHT = {
    "pairs, underscores": _pairs,
    "one line, split": _split,
    "a tuple": _args(tuple),
    "nproc-per-node=gpu": _args(
        lambda a: [x if not x.startswith("--nproc") else "--nproc-per-node=gpu" for x in a]
    ),
}

LAUNCH_WRONG = [
    ("standalone", _args(lambda a: ["--standalone", *a]), "--standalone is for one machine"),
    (
        "the old module",
        _args(lambda a: [*a[:-1], "-m", "helpers.ddp"]),
        "do not end with the script ddp_train.py",
    ),
    ("another script", _args(lambda a: [*a[:-1], "train.py"]), "do not end with the script ddp_train.py"),
    ("one string", _args(lambda a: " ".join(a)), "returned one string"),
    ("with torchrun", _args(lambda a: ["torchrun", *a]), "starts with the word 'torchrun'"),
    ("no rdzv-id", _without("--rdzv-id"), "--rdzv-id is"),
    ("no backend", _without("--rdzv-backend"), "--rdzv-backend is static, not c10d"),
    ("no nproc", _without("--nproc-per-node"), "--nproc-per-node is 1, not 4"),
    ("ints", lambda nnodes, gpus, endpoint, job: ["--nnodes", nnodes], "not strings but int"),
    ("static rendezvous", _static, "--rdzv-backend is static"),
    ("unknown option", _args(lambda a: ["--gpus=4", *a]), "torchrun cannot parse these arguments"),
    (
        "ignores the inputs",
        lambda nnodes, gpus, endpoint, job: solution.launch_args(2, 4, "10.0.0.1:29400", "cifar"),
        "the arguments do not follow the inputs",
    ),
    (
        "swapped counts",
        lambda nnodes, gpus, endpoint, job: solution.launch_args(gpus, nnodes, endpoint, job),
        "--nnodes is 4, not 2",
    ),
]


@pytest.mark.parametrize("answer", right_cases(LAUNCH_RIGHT))
def test_launch_args_right(answer, capsys):
    right(check_launch_args, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(LAUNCH_WRONG))
def test_launch_args_wrong(answer, fragment):
    wrong(check_launch_args, answer, fragment)
