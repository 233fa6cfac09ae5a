"""Checks for the exercises of ``05_distributed_data_parallel``.

``ddp_train`` runs in two real processes that join a Gloo process group, as under ``torchrun``
(see ``processes``); its result is compared with one process that trains on both shares. The
other two run on the CPU.
"""

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributed.run import get_args_parser
from torch.utils.data import DistributedSampler, TensorDataset

from helpers.checks import fail
from helpers.checks.harness import Machine, Told, describe, exercise, short
from helpers.checks.processes import Outcome, run_in_processes, show_printed

__all__ = ["check_ddp_train", "check_launch_args", "check_orders_for_epochs"]


def _ints(value: Any) -> list[int] | None:
    """``value`` as a list of ints, if it is a sequence of integers (list, tuple, array, tensor)."""
    if isinstance(value, torch.Tensor) and value.is_meta:
        return None
    if isinstance(value, torch.Tensor | np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, list | tuple | range):
        return None
    items = [_item(v) for v in value]
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in items):
        return [int(v) for v in items]
    return None


def _item(value: Any) -> Any:
    """A one-number tensor as its number; anything else as it is."""
    if torch.is_tensor(value) and value.numel() == 1 and not value.is_meta:
        return value.item()
    return value


# ---- exercise 2: ddp_train --------------------------------------------------------------------

_SIZE = 19  # samples: 10 per process, the last index repeated, in batches of 4, 4 and 2
_BATCH = 4
_EPOCHS = 2
_WORLD = 2


class _Recorded(TensorDataset):
    """A dataset that records which samples are read, in order."""

    def __init__(self, *tensors: torch.Tensor) -> None:
        super().__init__(*tensors)
        self.reads: list[int] = []

    def __getitem__(self, index: int) -> tuple[torch.Tensor, ...]:
        self.reads.append(int(index))
        return super().__getitem__(index)


def _setup(rank: int) -> tuple:
    """What each process is given: the same model, loss, optimizer, data; and the epochs."""
    generator = torch.Generator().manual_seed(5)
    inputs = torch.randn(_SIZE, 4, generator=generator)
    labels = torch.randint(3, (_SIZE,), generator=generator)
    model = _model()
    model.batch_sizes = []  # what each forward pass got
    model.register_forward_pre_hook(lambda module, args: module.batch_sizes.append(len(args[0])))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, nn.CrossEntropyLoss(), optimizer, _Recorded(inputs, labels), _EPOCHS


def _model() -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))


def _report(rank: int, arguments: tuple, result: Any) -> dict[str, Any]:
    """In each process, after ``ddp_train``: what it returned, read and left in the model."""
    model = arguments[0]
    weights = {key: value.detach().clone() for key, value in model.state_dict().items()}
    if isinstance(result, Mapping) and all(isinstance(v, torch.Tensor) for v in result.values()):
        returned = {str(key): value.detach().cpu().clone() for key, value in result.items()}
    else:
        returned = describe(result)
    reads = arguments[3].reads
    return {"returned": returned, "weights": weights, "reads": reads, "sizes": model.batch_sizes}


def _orders(rank: int, epochs: range) -> list[list[int]]:
    """What DistributedSampler gives ``rank`` in each of ``epochs``."""
    sampler = DistributedSampler(range(_SIZE), num_replicas=_WORLD, rank=rank)
    orders = []
    for epoch in epochs:
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def _reference(loss_scale: float = 1.0) -> dict[str, torch.Tensor]:
    """The weights after one process trains on both shares, each step on both ranks' batches.

    ``loss_scale`` multiplies each loss: a learner who divides the loss by the number of processes
    trains as ``_reference(1 / _WORLD)`` does."""
    model, loss_fn, optimizer, data, epochs = _setup(0)
    for epoch in range(epochs):
        shares = [_orders(rank, [epoch])[0] for rank in range(_WORLD)]
        for start in range(0, len(shares[0]), _BATCH):
            indices = [i for share in shares for i in share[start : start + _BATCH]]
            optimizer.zero_grad()
            loss = loss_fn(model(data.tensors[0][indices]), data.tensors[1][indices])
            (loss * loss_scale).backward()
            optimizer.step()
    return model.state_dict()


def _same_weights(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> bool:
    return all(torch.allclose(first[key], second[key], atol=1e-6) for key in second)


def _check_reads(rank: int, reads: list[int]) -> None:
    """``reads`` are what the sampler gives ``rank``, epoch by epoch, numbered from 0."""
    expected = _orders(rank, range(_EPOCHS))
    if reads == sum(expected, []):
        return
    if not reads:
        fail(
            f"process {rank} read no sample in this process",
            "load the batches here, with no worker processes (num_workers=0)",
        )
    _check_share(rank, reads)
    if reads == expected[0] * _EPOCHS:
        fail(
            "every epoch had the same order",
            "call sampler.set_epoch(epoch) at the start of each epoch",
        )
    unshuffled = list(
        DistributedSampler(range(_SIZE), num_replicas=_WORLD, rank=rank, shuffle=False)
    )
    if reads == unshuffled * _EPOCHS:
        fail(
            f"process {rank} read its share in the stored order",
            "keep DistributedSampler's shuffle=True, its default",
        )
    if reads == sum(_orders(rank, range(1, _EPOCHS + 1)), []):
        fail(
            f"process {rank} read epochs 1 and 2's orders: epochs numbered from 1, or "
            f"seed={rank} given to its sampler",
            "number the epochs from 0, and give every process the same seed (the default)",
        )
    if sorted(reads[: len(expected[0])]) == sorted(expected[0]):
        fail(
            f"process {rank} read its share in another order than the sampler's",
            "let DistributedSampler shuffle (its default) and set_epoch(epoch) each epoch",
        )
    fail(
        f"process {rank} read {short(reads, 50)}, not its share",
        "give the DataLoader sampler=DistributedSampler(dataset), nothing else",
    )


def _check_share(rank: int, reads: list[int]) -> None:
    """Whether ``rank`` read another share than its own: all of the data, part, or another's."""
    expected = _orders(rank, range(_EPOCHS))
    share = len(expected[0])
    if len(reads) == _SIZE * _EPOCHS:
        fail(
            f"process {rank} read all {_SIZE} samples each epoch, not its share of {share}",
            "give the DataLoader sampler=DistributedSampler(dataset), which reads the rank from "
            "the group (no num_replicas=1)",
        )
    kept = share - share % _BATCH
    if reads == sum((order[:kept] for order in expected), []):
        fail(
            f"process {rank} read {kept} of its {share} samples each epoch: the last, shorter "
            "batch was dropped",
            "leave drop_last out of the DataLoader (its default is False)",
        )
    if rank > 0 and reads == sum(_orders(0, range(_EPOCHS)), []):
        fail(
            f"process {rank} read process 0's share: its sampler was given rank 0 (LOCAL_RANK "
            "counts on one machine only)",
            "leave the rank to DistributedSampler, or give it dist.get_rank()",
        )


def _check_sizes(rank: int, sizes: list[int]) -> None:
    share = len(_orders(rank, [0])[0])
    expected = [min(_BATCH, share - start) for start in range(0, share, _BATCH)] * _EPOCHS
    if sizes != expected:
        fail(
            f"process {rank} ran its model on batches of {short(sizes, 40)}, not {expected}",
            f"batches of {_BATCH} per process: DataLoader(..., batch_size={_BATCH})",
        )


def _check_returned(report: dict[str, Any], rank: int) -> None:
    returned = report["returned"]
    if isinstance(returned, str):
        fail(f"ddp_train returned {returned}", "return the plain model's state_dict()")
    if any(key.startswith("module.") for key in returned):
        fail(
            "the keys start with 'module.', the DDP wrapper's prefix",
            "return the plain model's state_dict(), model.state_dict()",
        )
    weights = report["weights"]
    same = set(returned) == set(weights) and all(
        torch.equal(returned[key], weights[key]) for key in weights
    )
    if not same:
        fail(
            f"process {rank} returned other weights than its model holds",
            "return model.state_dict() after training",
        )


def _check_trained(reports: list[dict[str, Any]]) -> None:
    weights = [report["weights"] for report in reports]
    start = _model().state_dict()
    unchanged = [rank for rank, own in enumerate(weights) if _same_weights(own, start)]
    if unchanged and len(unchanged) < len(weights):
        fail(
            f"process {unchanged[0]}'s weights never changed, while the others' did",
            "run the same steps in every process: optimizer.step() on every rank, not only on "
            "rank 0",
        )
    first = weights[0]
    if any(not torch.equal(first[key], other[key]) for other in weights[1:] for key in first):
        fail(
            "the two processes ended with different weights",
            "wrap the model in DistributedDataParallel, which averages the gradients, and step "
            "the optimizer in every process",
        )
    if _same_weights(first, _reference(1 / _WORLD)):
        fail(
            f"the steps were {_WORLD} times too small: the loss was divided by the number of "
            "processes",
            "use the loss as it is: DistributedDataParallel already averages the gradients",
        )
    if not _same_weights(first, _reference()):
        fail(
            "the weights differ from one process's training on both shares",
            "per batch: zero_grad(), the loss of the DDP model's output, backward(), step()",
        )


_DDP_TOLD = (
    Told(
        r"not been initialized|init_process_group",
        "used the process group before joining it",
        "call dist.init_process_group('gloo') first",
    ),
    Told(r"twice", "joined the process group twice", "call init_process_group once"),
    Told(r"NCCL|nccl", "asked for NCCL, which needs GPUs", "join with the Gloo backend, 'gloo'"),
    Told(
        r"Connection closed|Connection reset|Timed out|peer",
        "waited in a collective that another process never called",
        "make every process call the same collectives, in the same order",
    ),
    Told(
        r"mutually exclusive with shuffle",
        "gave the DataLoader shuffle=True and a sampler",
        "leave shuffle out: DistributedSampler shuffles",
    ),
)


def _check_outcomes(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        if outcome.mistake:
            fail(outcome.mistake, outcome.fix, outcome.details)
    for outcome in outcomes:
        _check_reads(outcome.rank, outcome.report["reads"])
        _check_sizes(outcome.rank, outcome.report["sizes"])
        _check_returned(outcome.report, outcome.rank)
    _check_trained([outcome.report for outcome in outcomes])
    if any(outcome.group_left_open for outcome in outcomes):
        fail(
            "the processes left the process group open",
            "call dist.destroy_process_group() at the end",
        )


@exercise(
    "write ddp_train(model, loss_fn, optimizer, dataset, epochs) to train as one of 2 DDP "
    "processes, in batches of 4, and return the plain model's state_dict"
)
def check_ddp_train(ddp_train: Callable) -> str:
    # Two machines of one process each, as the notebook's two-machine launch: LOCAL_RANK is 0 in
    # both, so a sampler given LOCAL_RANK for its rank reads the same share twice.
    outcomes = run_in_processes(
        ddp_train, _setup, _report, world_size=_WORLD, per_machine=1, told=_DDP_TOLD
    )
    show_printed(outcomes)
    _check_outcomes(outcomes)
    return (
        "2 processes, each on its share, stepped as one process on both shares would, "
        "and left the group"
    )


# ---- exercise 1: orders_for_epochs ------------------------------------------------------------


def _sampler(epoch: int = 0) -> DistributedSampler:
    sampler = DistributedSampler(range(20), num_replicas=2, rank=1, shuffle=True, seed=0)
    sampler.set_epoch(epoch)
    return sampler


# Other samplers an answer must list as they are: a seed other than 0, a length the processes do
# not share evenly (the sampler repeats the first samples), no shuffling. An answer that makes its
# own order, or a new sampler, can match the first sampler by chance; not these.
_OTHER_SAMPLERS = (
    {"num_replicas": 3, "rank": 2, "seed": 7},
    {"num_replicas": 2, "rank": 0, "shuffle": False, "seed": 0},
)
_OTHER_LENGTH = 21


def _check_other_samplers(orders_for_epochs: Callable) -> None:
    for options in _OTHER_SAMPLERS:
        expected = []
        for epoch in range(3):
            sampler = DistributedSampler(range(_OTHER_LENGTH), **options)
            sampler.set_epoch(epoch)
            expected.append(list(sampler))
        given = DistributedSampler(range(_OTHER_LENGTH), **options)
        answer = Machine.cpu().run(orders_for_epochs, given, 3, consume=100)
        orders = [_ints(order) for order in answer] if isinstance(answer, list | tuple) else []
        if orders != expected:
            named = ", ".join(f"{key}={value}" for key, value in options.items())
            fail(
                f"on DistributedSampler(range({_OTHER_LENGTH}), {named}) the orders are wrong",
                "list the sampler given, after set_epoch(epoch): no new sampler, no shuffle of "
                "your own",
            )


@exercise(
    "write orders_for_epochs(sampler, epochs) so that it returns what sampler yields in each epoch"
)
def check_orders_for_epochs(orders_for_epochs: Callable) -> str:
    answer = Machine.cpu().run(orders_for_epochs, _sampler(), 3, consume=100)
    orders = [None]
    if isinstance(answer, list | tuple):
        orders = [_ints(order) for order in answer]
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
    wrong = [epoch for epoch in range(3) if orders[epoch] != list(_sampler(epoch))]
    if wrong:
        fail(
            f"the order of epoch {wrong[0]} is not the sampler's",
            "call set_epoch(epoch), then list it",
        )
    _check_other_samplers(orders_for_epochs)
    return "set_epoch gives each epoch its own shuffle, the same on every rank"


# ---- exercise 3: launch_args ------------------------------------------------------------------


def _parse(launch_args: Callable, *inputs: Any) -> Any:
    answer = Machine.cpu().run(launch_args, *inputs)
    if isinstance(answer, str):
        fail(
            "launch_args returned one string",
            "return one string per argument, as line.split() gives",
        )
    if not isinstance(answer, list | tuple):
        fail(
            f"launch_args returned {describe(answer)}",
            "return a list of strings, one per argument",
        )
    kinds = sorted({type(part).__name__ for part in answer if not isinstance(part, str)})
    if kinds:
        fail(f"some arguments are {', '.join(kinds)}, not strings", "write each as a string")
    if list(answer[:1]) == ["torchrun"]:
        fail("the list starts with the word 'torchrun'", "return only its arguments")
    if not any(part.endswith(".py") for part in answer) and "-m" not in answer:
        fail("the arguments name no script", "end with the script, 'ddp_train.py'")
    if "--standalone" in answer:
        fail(
            "--standalone is for one machine (it makes up a rendezvous)",
            "drop it for several machines",
        )
    parser = get_args_parser()
    parser.error = _refused_by_torchrun
    return parser.parse_args(list(answer))


def _refused_by_torchrun(why: str) -> None:
    fail(f"torchrun says: {short(why, 200)}", "use torchrun's own options")


def _wrong_settings(parsed: Any, nnodes: int, gpus: int, endpoint: str, job_id: str) -> list[str]:
    """What in the parsed arguments does not say ``nnodes`` machines of ``gpus`` processes each."""
    settings = {
        "nnodes": (parsed.nnodes, f"{nnodes}", f"{nnodes}:{nnodes}"),
        "nproc-per-node": (parsed.nproc_per_node, f"{gpus}", "gpu"),
        "rdzv-backend": (parsed.rdzv_backend, "c10d"),
        "rdzv-endpoint": (parsed.rdzv_endpoint or "unset", endpoint),
        "rdzv-id": (parsed.rdzv_id, job_id),
    }
    wrong = []
    for option, (got, *right) in settings.items():
        if f"{got}" not in right:
            wrong.append(f"--{option} is {short(got, 20)}, not {right[0]}")
    return wrong


_TORCHRUN_OPTIONS = {
    "--nnodes",
    "--nproc-per-node",
    "--rdzv-backend",
    "--rdzv-endpoint",
    "--rdzv-id",
}


def _without_backend(answer: list[str]) -> bool:
    return not any(part.replace("_", "-").startswith("--rdzv-backend") for part in answer)


@exercise(
    "write launch_args(nnodes, gpus_per_node, endpoint, job_id) to return the torchrun arguments"
)
def check_launch_args(launch_args: Callable) -> str:
    inputs = (2, 4, "10.0.0.1:29400", "cifar")
    parsed = _parse(launch_args, *inputs)
    if parsed.training_script == "python":
        fail(
            "the word python comes before the script",
            "drop it, torchrun runs the script with Python",
        )
    if parsed.module or parsed.training_script.split("/")[-1] != "ddp_train.py":
        fail("the arguments do not end with the script ddp_train.py", "end with 'ddp_train.py'")
    after_script = [part for part in parsed.training_script_args if part.startswith("--")]
    if any(part.split("=")[0].replace("_", "-") in _TORCHRUN_OPTIONS for part in after_script):
        fail(
            "torchrun's options come after the script, so torchrun hands them to the script",
            "put torchrun's options first and the script last",
        )
    if not _without_backend(Machine.cpu().run(launch_args, *inputs)) and (
        parsed.rdzv_backend != "c10d"
    ):
        fail(
            f"--rdzv-backend is {short(parsed.rdzv_backend, 20)}, not c10d",
            "use --rdzv-backend=c10d, which numbers the machines itself",
        )
    if _without_backend(Machine.cpu().run(launch_args, *inputs)):
        fail(
            "without --rdzv-backend torchrun uses a static rendezvous, where every machine needs "
            "its own --node-rank",
            "add --rdzv-backend=c10d, which numbers the machines itself",
        )
    problems = _wrong_settings(parsed, *inputs)
    if problems:
        fail("; ".join(problems[:2]), "set each from the function's arguments")
    other = (3, 8, "node0:1234", "run7")
    if _wrong_settings(_parse(launch_args, *other), *other):
        fail(
            "the arguments do not follow the inputs",
            "build them from the function's four arguments",
        )
    return (
        "torchrun reads these as one of 2 machines with 4 processes each, meeting at the endpoint"
    )
