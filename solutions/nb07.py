"""Reference solutions for the exercises of ``07_memory_and_errors`` (try them yourself first)."""

import torch


def state_bytes(model, optimizer):
    group_of = {p: group for group in optimizer.param_groups for p in group["params"]}
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()  # bytes: the dtype decides how many per number
        total += size  # the parameter itself
        if not p.requires_grad:
            continue  # frozen: no gradient, no optimizer state
        total += size  # its gradient, as large as the parameter
        group = group_of.get(p)
        if group is None:
            continue  # the optimizer does not update it: no state
        if isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW):
            total += 2 * size  # exp_avg and exp_avg_sq
        elif group.get("momentum", 0) != 0:
            total += size  # SGD's momentum buffer
    return total


# The exercise gives the six things a training step uses, as the notebook's loop names them.
def accumulated_step(model, loss_fn, optimizer, inputs, targets, micro_batch):  # noqa: PLR0913
    optimizer.zero_grad()  # drop the gradients of the previous batch, once
    total = 0.0
    for x, y in zip(inputs.split(micro_batch), targets.split(micro_batch), strict=True):
        # this piece's share of the batch's mean loss: its mean times its size / the batch size
        loss = loss_fn(model(x), y) * (len(x) / len(inputs))
        loss.backward()  # gradients add up in .grad
        total = total + loss.detach()  # stays on the device
    optimizer.step()  # one update, for the whole batch
    return float(total)  # one read, at the end


def fit_batch(train, batch_size):
    n = batch_size
    while True:
        try:
            train(n)
            return n
        except torch.OutOfMemoryError:
            if n == 1:
                raise  # not even one example fits: let the error through
        # out of the except block: the error, and the failed call's tensors with it, are freed
        n //= 2
