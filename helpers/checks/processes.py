"""Run a learner's function in several real processes, as ``torchrun`` runs a script.

Each process is a fork of this one, so it has the learner's function and everything the notebook
defined. It gets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``
and ``MASTER_PORT`` in its environment, as under ``torchrun``, and runs the function on the CPU
(``Machine.cpu()``: any use of a GPU is refused). What the function prints is kept and shown
after, each line after its rank; what C++ code writes (Gloo's notices) is dropped.

The processes meet at a store that this process holds, as they meet at torchrun's agent: its port
stays taken from before they start until they end. A port found free, closed, then handed to the
processes could be taken in between by another program, such as another check running at once.

A process that fails stops the others at once: they would wait for it in their next collective.
"""

import contextlib
import io
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

import torch
import torch.distributed as dist

from helpers.checks import CheckFailed, fail
from helpers.checks.harness import Machine, Told

__all__ = ["Outcome", "run_in_processes"]


@dataclass
class Outcome:
    """What one process sends back: its ``report``, or the sentence of its failure."""

    rank: int
    report: dict[str, Any] = field(default_factory=dict)
    mistake: str = ""
    fix: str = ""
    details: tuple[str, ...] = ()
    printed: str = ""
    group_left_open: bool = False
    bug: str = ""  # the check's own code failed in the process


@dataclass(frozen=True)
class _Job:
    """What every process runs: ``function(*setup(rank))``, reported by ``report``."""

    function: Callable
    setup: Callable[[int], tuple]
    report: Callable[[int, tuple, Any], dict[str, Any]]
    told: tuple[Told, ...]
    per_machine: int  # processes per machine: LOCAL_RANK counts within one


TIMEOUT = 60.0  # seconds for all processes; the check's run takes about 3


def run_in_processes(
    function: Callable,
    setup: Callable[[int], tuple],
    report: Callable[[int, tuple, Any], dict[str, Any]],
    *,
    world_size: int = 2,
    per_machine: int | None = None,
    told: tuple[Told, ...] = (),
) -> list[Outcome]:
    """Run ``function(*setup(rank))`` in ``world_size`` processes; one ``Outcome`` per rank.

    The processes play ``world_size / per_machine`` machines of ``per_machine`` processes each
    (default: one machine of all of them), so ``LOCAL_RANK`` differs from ``RANK`` past the first
    machine, as under torchrun on several machines.

    ``report(rank, arguments, result)`` runs in each process after the function and returns what
    the check needs (plain values and tensors). A failure of the function is told as a sentence
    (``told`` first); a process that does not finish within ``TIMEOUT`` seconds fails the check.
    """
    if dist.is_available() and dist.is_initialized():
        fail(
            "this process is in a process group already, which the check's processes would share",
            "call dist.destroy_process_group() before the check",
        )
    per_machine = per_machine or world_size
    if world_size % per_machine:
        raise ValueError(f"{world_size} processes do not fill machines of {per_machine} each")
    job = _Job(function, setup, report, told, per_machine)
    context = multiprocessing.get_context("fork")
    pipes = [context.Pipe() for _ in range(world_size)]  # the port goes out, the Outcome back
    processes = [
        context.Process(target=_child, args=(job, rank, world_size, pipes[rank][1]))
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    for _, child_end in pipes:
        child_end.close()  # the children hold their own ends
    try:
        # Made after the forks: a fork copies only the thread that calls it, and the store
        # serves from a thread of its own.
        store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        for parent_end, _ in pipes:
            parent_end.send(store.port)
        return _collect([parent_end for parent_end, _ in pipes], processes, TIMEOUT)
    finally:
        for process in processes:
            _stop(process)


def _collect(
    pipes: list[Connection], processes: list[multiprocessing.Process], timeout: float
) -> list[Outcome]:
    outcomes: dict[int, Outcome] = {}
    waiting = {pipe: rank for rank, pipe in enumerate(pipes)}
    deadline = time.monotonic() + timeout
    while waiting:
        ready = wait(list(waiting), timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            late = sorted(waiting.values())
            fail(
                f"process {late[0]} did not finish within {timeout:.0f} s, waiting for the others",
                "make every process call the same collectives, in the same order",
            )
        for pipe in ready:
            rank = waiting.pop(pipe)
            outcomes[rank] = _received(pipe, rank, processes[rank])
            if outcomes[rank].mistake:
                return [outcomes[rank]]  # the others would wait for it: they are stopped
    return [outcomes[rank] for rank in sorted(outcomes)]


def _received(pipe: Connection, rank: int, process: multiprocessing.Process) -> Outcome:
    try:
        sent = pipe.recv_bytes()
    except EOFError:
        process.join(5)
        return Outcome(
            rank,
            mistake=f"process {rank} ended without a word (exit code {process.exitcode})",
            fix="do not end the process: return from the function instead",
        )
    outcome = torch.load(io.BytesIO(sent), weights_only=False)  # written by _child, below
    if outcome.bug:
        raise RuntimeError(f"in process {rank}: {outcome.bug}")
    return outcome


def _stop(process: multiprocessing.Process) -> None:
    process.join(1)
    if process.is_alive():
        process.kill()
        process.join()


def _child(job: _Job, rank: int, world_size: int, pipe: Connection) -> None:
    """In the forked process: run the job as rank ``rank`` and send its ``Outcome``."""
    port = pipe.recv()  # the parent's store, once every process has started
    torch.set_num_threads(1)  # a forked process must not use the parent's thread pool
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank % job.per_machine),
        GROUP_RANK=str(rank // job.per_machine),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(job.per_machine),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        # as torchrun tells its processes: a store serves at MASTER_PORT, so rank 0 starts none
        TORCHELASTIC_USE_AGENT_STORE="True",
    )
    _drop_native_output()
    printed = io.StringIO()
    outcome = Outcome(rank)
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            arguments = job.setup(rank)
            result = Machine.cpu().run(job.function, *arguments, told=job.told)
            outcome.report = job.report(rank, arguments, result)
        except CheckFailed as error:
            outcome.mistake = error.mistake
            outcome.fix = error.fix
            outcome.details = (f"in process {rank}", *error.details)
        except Exception as error:  # the check's setup or report: a bug of the course
            outcome.bug = f"{type(error).__name__}: {error}"
        outcome.group_left_open = dist.is_initialized()
        if outcome.group_left_open:
            dist.destroy_process_group()
    outcome.printed = printed.getvalue()
    sent = io.BytesIO()
    torch.save(outcome, sent)  # tensors travel as bytes, not as shared memory
    pipe.send_bytes(sent.getvalue())
    pipe.close()


def _drop_native_output() -> None:
    """Send what C++ code writes to this process's stdout and stderr to nowhere."""
    sys.stdout.flush()
    sys.stderr.flush()
    nowhere = os.open(os.devnull, os.O_WRONLY)
    os.dup2(nowhere, 1)
    os.dup2(nowhere, 2)
    os.close(nowhere)


def show_printed(outcomes: list[Outcome]) -> None:
    """Print what each process printed, each line after its rank, as ``torchrun --tee`` does."""
    for outcome in outcomes:
        for line in outcome.printed.splitlines():
            print(f"[rank {outcome.rank}] {line}")
