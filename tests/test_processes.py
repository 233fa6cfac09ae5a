"""helpers.checks.processes: the processes it starts meet at a port that no other program can take
while they run, as under torchrun."""

import errno
import os
import socket

from helpers.checks.processes import run_in_processes


def _bind_master_port() -> int:
    """Bind MASTER_PORT as another program would, before joining any group: the errno, or 0."""
    with socket.socket() as other:
        try:
            other.bind((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
        except OSError as error:
            return error.errno
    return 0


def _no_arguments(rank: int) -> tuple:
    return ()


def _errno(rank: int, arguments: tuple, result: int) -> dict:
    return {"errno": result, "port": os.environ["MASTER_PORT"]}


def test_the_port_is_taken_before_the_processes_start():
    outcomes = run_in_processes(_bind_master_port, _no_arguments, _errno, world_size=2)
    assert [outcome.mistake for outcome in outcomes] == ["", ""]
    assert [outcome.report["errno"] for outcome in outcomes] == [errno.EADDRINUSE] * 2
    assert outcomes[0].report["port"] == outcomes[1].report["port"]  # one meeting place
