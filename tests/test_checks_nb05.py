"""helpers.checks.nb05: right answers in other spellings pass, typical mistakes are refused by name."""

import random

import numpy as np
import pytest
import torch
from exercise_answers import judge, table_cases
from torch.utils.data import DataLoader, DistributedSampler

from helpers.checks.nb05 import check_launch_args, check_orders_for_epochs, check_shard_indices
from solutions import nb05 as solution


def _padded(padding):  # pads range(n) with padding(n, how_many), then deals the indices out
    return lambda n, w, r: (list(range(n)) + padding(n, -(-n // w) * w - n))[r::w]


SHARD = [  # (name, answer, a fragment of the message; None for a right answer); w: world_size, r: rank
    ("modulo", lambda n, w, r: [(r + i * w) % n for i in range(-(-n // w))], None),
    (
        "the sampler",
        lambda n, w, r: list(DistributedSampler(range(n), w, r, shuffle=False)),
        "leaves out",
    ),
    ("NumPy array", lambda n, w, r: (np.arange(-(-n // w) * w) % n)[r::w], "(.tolist())"),
    ("tensor", lambda n, w, r: torch.arange(r, -(-n // w) * w, w) % n, "(.tolist())"),
    ("NumPy ints", lambda n, w, r: list((np.arange(-(-n // w) * w) % n)[r::w]), None),
    ("no padding", lambda n, w, r: list(range(r, n, w)), "pad by repeating the first indices"),
    (
        "contiguous",
        lambda n, w, r: list(range(n))[r * -(-n // w) :][: -(-n // w)],
        "deal them out in turn",
    ),
    ("reversed", lambda n, w, r: solution.shard_indices(n, w, r)[::-1], "in another order"),
    (
        "off by one",
        lambda n, w, r: [(r + 1 + i * w) % n for i in range(-(-n // w))],
        "should be [0, 3",
    ),
    ("a string", lambda n, w, r: "0,3,6,9", "returned '0,3,6,9'"),
    ("a set", lambda n, w, r: set(solution.shard_indices(n, w, r)), "returned {0, "),
    ("padded once", _padded(lambda n, k: list(range(n))[:k]), "rank=4 there are 0 indices"),
    ("padded with zeros", _padded(lambda n, k: [0] * k), "the padding is [0], not [1]"),
    ("padded with the last", _padded(lambda n, k: [n - 1] * k), "the padding is [9], not [0]"),
    ("drops the rest", lambda n, w, r: list(range(n - n % w))[r::w], "there are 3 indices"),
    (
        "floats",
        lambda n, w, r: [float(i) for i in solution.shard_indices(n, w, r)],
        "return a list of ints",
    ),
]


def _set(sampler, epoch):
    sampler.set_epoch(epoch)
    return sampler


def _each(order):
    """An answer that lists order(sampler, epoch, epochs) for each epoch."""
    return lambda sampler, epochs: [order(sampler, epoch, epochs) for epoch in range(epochs)]


ORDERS = [  # s: the sampler, e: the epoch, k: the number of epochs
    ("in a comprehension", lambda s, k: [(s.set_epoch(e), list(s))[1] for e in range(k)], None),
    (
        "loader",
        _each(lambda s, e, k: [int(b) for b in DataLoader(range(20), sampler=_set(s, e))]),
        None,
    ),
    (
        "batches of one",
        _each(lambda s, e, k: list(DataLoader(range(20), sampler=_set(s, e)))),
        None,
    ),
    ("a generator of tuples", lambda s, k: (tuple(_set(s, e)) for e in range(k)), None),
    (
        "forgot set_epoch",
        _each(lambda s, e, k: list(s)),
        "every epoch has the same order: call sampler.set_",
    ),
    ("set_epoch(0)", _each(lambda s, e, k: list(_set(s, 0))), "every epoch has the same order"),
    (
        "set_epoch(epochs)",
        _each(lambda s, e, k: list(_set(s, k))),
        "every epoch has the same order",
    ),
    ("epochs from 1", _each(lambda s, e, k: list(_set(s, e + 1))), "number the epochs from 0"),
    (
        "set_epoch after",
        _each(lambda s, e, k: (list(s), s.set_epoch(e))[0]),
        "the order of epoch 1 is not",
    ),
    (
        "own shuffle",
        _each(lambda s, e, k: random.sample(list(s), 10)),
        "the order of epoch 0 is not the",
    ),
    (
        "sorted",
        _each(lambda s, e, k: sorted(_set(s, e))),
        "the order of epoch 0 is not the sampler's",
    ),
    ("one epoch", lambda s, k: [list(s)], "returned 1 order(s)"),
    ("one flat list", lambda s, k: list(s), "returned a list of 10 items"),
    ("the sampler", lambda s, k: [s] * k, "returned a list of 3 items"),
]


def _args(change):
    return lambda *inputs: change(solution.launch_args(*inputs))


def _line(text):
    """An answer that puts nnodes, gpus_per_node, endpoint and job_id into text ({0} to {3}) and splits it."""
    return lambda *inputs: text.format(*inputs).split()


PAIRS = "--nnodes {0} --nproc_per_node {1} --rdzv_id {3} --rdzv_backend c10d --rdzv_endpoint {2} ddp_train.py"
LINE = "--nnodes={0}:{0} --nproc-per-node={1} --rdzv-endpoint={2} --rdzv-id={3} "
STATIC = "--nnodes={0} --nproc-per-node={1} --master-addr={2} ddp_train.py"

LAUNCH = [  # n: nnodes, g: gpus_per_node, e: endpoint, j: job_id
    ("pairs, underscores", _line(PAIRS), None),
    ("one line, split", _line(LINE + "--rdzv-backend=c10d nb/ddp_train.py -e 2"), None),
    ("a tuple", _args(tuple), None),
    ("nproc-per-node=gpu", _args(lambda a: [x.replace("node=4", "node=gpu") for x in a]), None),
    ("standalone", _args(lambda a: ["--standalone", *a]), "--standalone is for one machine"),
    (
        "the old module",
        _args(lambda a: [*a[:-1], "-m", "helpers.ddp"]),
        "do not end with the script",
    ),
    (
        "another script",
        _args(lambda a: [*a[:-1], "train.py"]),
        "do not end with the script ddp_train.py",
    ),
    (
        "python first",
        _args(lambda a: [*a[:-1], "python", "ddp_train.py"]),
        "the word python comes before",
    ),
    ("one string", _args(" ".join), "returned one string"),
    ("with torchrun", _args(lambda a: ["torchrun", *a]), "starts with the word 'torchrun'"),
    (
        "no rdzv-id",
        _args(lambda a: [x for x in a if "rdzv-id" not in x]),
        "--rdzv-id is none, not cifar",
    ),
    ("no backend", _args(lambda a: [x for x in a if "backend" not in x]), "is static, not c10d"),
    (
        "no nproc",
        _args(lambda a: [x for x in a if "nproc" not in x]),
        "--nproc-per-node is 1, not 4",
    ),
    ("ints", lambda n, g, e, j: ["--nnodes", n], "some arguments are int, not strings"),
    ("static rendezvous", _line(STATIC), "--rdzv-backend is static"),
    ("unknown option", _args(lambda a: ["--gpus=4", *a]), "torchrun says: unrecognized arguments"),
    (
        "ignores the inputs",
        lambda *_: solution.launch_args(2, 4, "10.0.0.1:29400", "cifar"),
        "do not follow",
    ),
    ("swapped counts", lambda n, g, e, j: solution.launch_args(g, n, e, j), "--nnodes is 4, not 2"),
    ("all processes", lambda n, g, e, j: solution.launch_args(n, n * g, e, j), "is 8, not 4"),
]

TABLES = {check_shard_indices: SHARD, check_orders_for_epochs: ORDERS, check_launch_args: LAUNCH}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
