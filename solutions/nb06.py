"""Reference solutions for the exercises of ``06_performance`` (try them yourself first)."""

import torch


def time_per_call(fn, synchronize, clock, *, warmup=2, repeats=10):
    for _ in range(warmup):
        fn()
    synchronize()  # the warm-up's work must be finished before the clock starts
    start = clock()
    for _ in range(repeats):
        fn()
    synchronize()  # and this work finished before it stops
    return (clock() - start) / repeats


def device_batches(images, labels, batch_size, generator):
    # drawn where the generator lives (a CPU generator cannot draw on a GPU), then moved once
    order = torch.randperm(len(labels), generator=generator, device=generator.device).to(
        labels.device
    )
    for start in range(0, len(labels), batch_size):
        index = order[start : start + batch_size]
        yield images[index], labels[index]


def train_epoch(model, batches, loss_fn, optimizer):
    total = None
    seen = 0
    for x, y in batches:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step_total = loss.detach() * len(y)  # stays on the device: no wait for it
        total = step_total if total is None else total + step_total
        seen += len(y)
    return total / seen
