"""Reference solutions for the exercises of ``05_distributed_data_parallel`` (try them first)."""

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler


def ddp_train(model, loss_fn, optimizer, dataset, epochs):
    """One process's part of a DDP run; every process runs the same function."""
    dist.init_process_group("gloo")  # reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    ddp_model = DistributedDataParallel(model)  # averages the gradients over the processes
    sampler = DistributedSampler(dataset)  # this process's share of the samples, shuffled
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same in every process
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss_fn(ddp_model(inputs), targets).backward()
            optimizer.step()
    dist.destroy_process_group()
    return model.state_dict()  # the plain model's: no "module." prefix


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
