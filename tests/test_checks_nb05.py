"""helpers.checks.nb05: right answers in other spellings pass, typical mistakes are refused by
name. ``ddp_train`` runs in two real processes for every row of its table (about 2 s each)."""

import os
import random

import pytest
import torch
import torch.distributed as dist
from exercise_answers import judge, table_cases
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from helpers.checks.nb05 import check_ddp_train, check_launch_args, check_orders_for_epochs
from solutions import nb05 as solution


def _ddp(**change):
    """The reference ddp_train with one part changed (see the keywords below)."""
    init = change.get("init", True)
    backend = change.get("backend", "gloo")
    wrap = change.get("wrap", True)
    sampler_of = change.get("sampler", DistributedSampler)
    loader_options = change.get("loader", {"batch_size": 4})
    epoch_of = change.get("epoch", lambda epoch: epoch)
    destroy = change.get("destroy", True)
    loss_divisor = change.get("loss_divisor", lambda: 1)
    steps_on = change.get("steps_on", lambda rank: True)
    returned = change.get("returned", lambda model, ddp_model: model.state_dict())

    def ddp_train(model, loss_fn, optimizer, dataset, epochs):
        if init:
            dist.init_process_group(backend)
        ddp_model = DistributedDataParallel(model) if wrap else model
        sampler = sampler_of(dataset) if sampler_of else None
        loader = DataLoader(dataset, sampler=sampler, **loader_options)
        for epoch in range(epochs):
            if sampler is not None and epoch_of is not None:
                sampler.set_epoch(epoch_of(epoch))
            for inputs, targets in loader:
                optimizer.zero_grad()
                loss = loss_fn(ddp_model(inputs), targets) / loss_divisor()
                loss.backward()
                if steps_on(dist.get_rank()):
                    optimizer.step()
        if destroy:
            dist.destroy_process_group()
        return returned(model, ddp_model)

    return ddp_train


def _rank_and_size(model, loss_fn, optimizer, dataset, epochs):
    """Joins with the rank and the world size named, as a learner may."""
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
    ddp_model = DistributedDataParallel(model)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=dist.get_rank())
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for inputs, targets in DataLoader(dataset, batch_size=4, sampler=sampler):
            optimizer.zero_grad()
            loss_fn(ddp_model(inputs), targets).backward()
            optimizer.step()
    dist.destroy_process_group()
    return ddp_model.module.state_dict()


def _unshuffled(dataset):
    return DistributedSampler(dataset, shuffle=False)


def _seeded_by_rank(dataset):
    return DistributedSampler(dataset, seed=dist.get_rank())


def _rank_from_local_rank(dataset):
    return DistributedSampler(dataset, rank=int(os.environ["LOCAL_RANK"]))


def _one_replica(dataset):
    return DistributedSampler(dataset, num_replicas=1, rank=0)


def _one_rank_skips_a_collective(model, loss_fn, optimizer, dataset, epochs):
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1))
    dist.destroy_process_group()
    return model.state_dict()


DDP = [
    ("the module's state_dict", _ddp(returned=lambda m, d: d.module.state_dict()), None),
    ("drop_last", _ddp(loader={"batch_size": 4, "drop_last": False}), None),
    ("rank and world size named", _rank_and_size, None),
    ("no process group", _ddp(init=False), "call dist.init_process_group('gloo') first"),
    ("NCCL on the CPU", _ddp(backend="nccl"), "asked for NCCL, which needs GPUs"),
    ("no DDP", _ddp(wrap=False), "wrap the model in DistributedDataParallel"),
    ("no sampler", _ddp(sampler=None), "give the DataLoader sampler=DistributedSampler(dataset)"),
    ("shuffle and a sampler", _ddp(loader={"batch_size": 4, "shuffle": True}), "shuffle=True"),
    ("not shuffled", _ddp(sampler=_unshuffled), "read its share in the stored order"),
    ("no set_epoch", _ddp(epoch=None), "call sampler.set_epoch(epoch) at the start of each epoch"),
    ("epochs from 1", _ddp(epoch=lambda epoch: epoch + 1), "number the epochs from 0"),
    ("batches of 8", _ddp(loader={"batch_size": 8}), "batches of [8, 2, 8, 2], not [4, 4, 2"),
    ("the wrapper's keys", _ddp(returned=lambda m, d: d.state_dict()), "'module.', the DDP"),
    ("group left open", _ddp(destroy=False), "call dist.destroy_process_group() at the end"),
    ("returns nothing", _ddp(returned=lambda m, d: None), "ddp_train returned None"),
    ("seed=rank", _ddp(sampler=_seeded_by_rank), "give every process the same seed"),
    ("num_replicas=1", _ddp(sampler=_one_replica), "(no num_replicas=1)"),
    ("rank=LOCAL_RANK", _ddp(sampler=_rank_from_local_rank), "read process 0's share"),
    ("drop_last=True", _ddp(loader={"batch_size": 4, "drop_last": True}), "leave drop_last out"),
    ("step on rank 0 only", _ddp(steps_on=lambda rank: rank == 0), "step() on every rank"),
    (
        "loss divided by the world size",
        _ddp(loss_divisor=dist.get_world_size),
        "DistributedDataParallel already averages",
    ),
    (
        "a collective on one rank",
        _one_rank_skips_a_collective,
        "make every process call the same collectives",
    ),
]


def _set(sampler, epoch):
    sampler.set_epoch(epoch)
    return sampler


def _set_epoch_after(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        orders.append(list(sampler))
        sampler.set_epoch(epoch)
    return orders


def _each(order):
    """An answer that lists order(sampler, epoch, epochs) for each epoch."""
    return lambda sampler, epochs: [order(sampler, epoch, epochs) for epoch in range(epochs)]


def _own_permutation(sampler, epochs):
    """Makes the order itself, as DistributedSampler does with seed 0 and an even split."""
    orders = []
    for epoch in range(epochs):
        generator = torch.Generator().manual_seed(epoch)
        order = torch.randperm(len(sampler.dataset), generator=generator).tolist()
        orders.append(order[sampler.rank :: sampler.num_replicas])
    return orders


def _new_sampler_per_epoch(sampler, epochs):
    """A new sampler each epoch, with the epoch as its seed."""
    orders = []
    for epoch in range(epochs):
        new = DistributedSampler(
            sampler.dataset, num_replicas=sampler.num_replicas, rank=sampler.rank, seed=epoch
        )
        orders.append(list(new))
    return orders


ORDERS = [  # s: the sampler, e: the epoch, k: the number of epochs
    ("set_epoch through a helper", lambda s, k: [list(_set(s, e)) for e in range(k)], None),
    (
        "loader",
        _each(lambda s, e, k: [int(b) for b in DataLoader(s.dataset, sampler=_set(s, e))]),
        None,
    ),
    (
        "batches of one",
        _each(lambda s, e, k: list(DataLoader(s.dataset, sampler=_set(s, e)))),
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
    ("set_epoch after", _set_epoch_after, "the order of epoch 1 is not"),
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
    ("its own randperm", _own_permutation, "no shuffle of your own"),
    ("a new sampler, seed=epoch", _new_sampler_per_epoch, "no new sampler"),
]


def _args(change):
    return lambda *inputs: change(solution.launch_args(*inputs))


def _line(text):
    """An answer that puts nnodes, gpus_per_node, endpoint, job_id ({0} to {3}) in text, split."""
    return lambda *inputs: text.format(*inputs).split()


PAIRS = (
    "--nnodes {0} --nproc_per_node {1} --rdzv_id {3} --rdzv_backend c10d --rdzv_endpoint {2} "
    "ddp_train.py"
)
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
    (
        "no backend",
        _args(lambda a: [x for x in a if "backend" not in x]),
        "without --rdzv-backend torchrun uses a static rendezvous",
    ),
    (
        "no nproc",
        _args(lambda a: [x for x in a if "nproc" not in x]),
        "--nproc-per-node is 1, not 4",
    ),
    ("ints", lambda n, g, e, j: ["--nnodes", n], "some arguments are int, not strings"),
    ("no script", _args(lambda a: a[:-1]), "name no script"),
    ("script first", _args(lambda a: [a[-1], *a[:-1]]), "put torchrun's options first"),
    ("static rendezvous", _line(STATIC), "add --rdzv-backend=c10d"),
    ("backend static", _args(lambda a: [*a[:3], "--rdzv-backend=static", *a[4:]]), "is static"),
    ("unknown option", _args(lambda a: ["--gpus=4", *a]), "torchrun says: unrecognized arguments"),
    (
        "ignores the inputs",
        lambda *_: solution.launch_args(2, 4, "10.0.0.1:29400", "cifar"),
        "do not follow",
    ),
    ("swapped counts", lambda n, g, e, j: solution.launch_args(g, n, e, j), "--nnodes is 4, not 2"),
    ("all processes", lambda n, g, e, j: solution.launch_args(n, n * g, e, j), "is 8, not 4"),
]

TABLES = {check_ddp_train: DDP, check_orders_for_epochs: ORDERS, check_launch_args: LAUNCH}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
