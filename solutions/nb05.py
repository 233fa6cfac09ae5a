"""Reference solutions for the exercises of ``05_distributed_data_parallel`` (try them yourself first)."""

import math


def shard_indices(n, world_size, rank):
    per_rank = math.ceil(n / world_size)
    padded = list(range(n))
    padded += padded[: per_rank * world_size - n]  # repeat the first indices to even the shares out
    while len(padded) < per_rank * world_size:  # when n < world_size the list is repeated again
        padded += padded[: per_rank * world_size - len(padded)]
    return padded[rank::world_size]


def orders_for_epochs(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def launch_args(nnodes, gpus_per_node, endpoint, job_id):
    # the same line on every machine: with c10d, torchrun numbers the machines itself
    return [
        f"--nnodes={nnodes}",
        f"--nproc-per-node={gpus_per_node}",
        f"--rdzv-id={job_id}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        "ddp_train.py",
    ]
