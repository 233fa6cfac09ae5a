"""How fast the course's DataLoaders feed a GPU: a one-off probe for the notebooks' time on a GPU (issue 12).

On the H100 (2026-11-23) the notebook cells fed by a ``DataLoader`` over PIL images with 4 worker
processes took 174 s of the course's 578: 01-13 (``Tudui``, batch 64, 10 epochs and their tests in
48.3 s), 02-07 (the same in 43.7 s), 03-02 (``CifarNet``, 5 epochs in 31.3 s, its imports included)
and 05-08 (7,719 to 8,070 images/s an epoch, 51.1 s with its start). The bench's ladder fed ``Tudui``
at 17,328 images/s from 8 persistent workers with pinned memory and at 26,927 from the data on the
device. Whether more workers, persistent workers or pinned memory would feed those cells faster
cannot be told from those runs: this probe times the loaders alone and with ``Tudui``'s training
step, one setting at a time, so that ``helpers.data.loader_workers`` is chosen from measurements.

    python3 scripts/loader_probe.py [--out results/gpu/<device>/loader-probe-<date>.json]

Each setting runs ``--epochs`` epochs over the training images (batch 64, shuffled, as in 01); every
epoch's images/s and the seconds until its first batch are recorded, and the median rate after the
first epoch. Workers that are not persistent start again every epoch, as in the notebooks, so their
start is in every epoch's rate; persistent workers start once, in the first. The process starts CUDA
before the loaders, as a notebook does. On a CPU it runs (with ``--train-size``) so that it can be
tested; only a GPU's figures mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from torchvision import transforms

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.data import load_cifar10  # noqa: E402
from helpers.devices import pick_device  # noqa: E402
from helpers.fastpath import DeviceLoader, dataset_tensors  # noqa: E402
from helpers.models import Tudui  # noqa: E402
from helpers.timing import synchronize  # noqa: E402


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _workers(n: int) -> str:
    return f"{n} worker{'s' if n != 1 else ''}"


def settings(cores: int) -> dict[str, dict]:
    """Setting name -> how to build it: DataLoader keywords, the training step or not, the transform."""
    counts = sorted({w for w in (1, 2, 4, 8, cores - 1) if 1 <= w <= max(1, cores - 1)})
    most, four = counts[-1], min(4, counts[-1])  # 4: what loader_workers gives on the H100's 16 cores
    chosen: dict[str, dict] = {"no workers": {"workers": 0}}
    for w in counts:
        chosen[_workers(w)] = {"workers": w}
    for w in sorted({four, most}):
        chosen[f"{_workers(w)}, persistent"] = {"workers": w, "persistent": True}
        chosen[f"{_workers(w)}, persistent, pinned"] = {"workers": w, "persistent": True, "pin": True}
    chosen[f"{_workers(four)}, ToTensor and Normalize (as 03)"] = {"workers": four, "normalize": True}
    # with Tudui's step, as 01 trains it: what the cells see
    chosen["Tudui's step, no workers"] = {"workers": 0, "step": True}
    chosen[f"Tudui's step, {_workers(four)}"] = {"workers": four, "step": True}
    chosen[f"Tudui's step, {_workers(most)}, persistent, pinned"] = {
        "workers": most,
        "persistent": True,
        "pin": True,
        "step": True,
    }
    chosen["Tudui's step, the data on the device (the ceiling)"] = {"device_data": True, "step": True}
    return chosen


def tudui_step(device: torch.device):
    torch.manual_seed(0)
    model = Tudui().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


_DATASETS: dict[tuple, object] = {}


def _dataset(size: int | None, normalize: bool):
    """The training images with 01's transform (or 03's), made once per process."""
    if (size, normalize) not in _DATASETS:
        steps = [transforms.ToTensor()]
        if normalize:
            steps.append(transforms.Normalize((0.5,) * 3, (0.5,) * 3))
        _DATASETS[size, normalize] = load_cifar10(train=True, transform=transforms.Compose(steps), size=size)
    return _DATASETS[size, normalize]


def run_setting(name: str, how: dict, size: int | None, device: torch.device, epochs: int) -> dict:
    pin = bool(how.get("pin")) and device.type == "cuda"
    if how.get("device_data"):
        images, labels = dataset_tensors(_dataset(size, False), device)
        loader = DeviceLoader(images, labels, batch_size=64, shuffle=True, generator=torch.Generator(device))
    else:
        dataset = _dataset(size, bool(how.get("normalize")))
        workers = how["workers"]
        loader = DataLoader(
            dataset,
            batch_size=64,
            shuffle=True,
            generator=torch.Generator().manual_seed(0),
            num_workers=workers,
            persistent_workers=bool(how.get("persistent")) and workers > 0,
            pin_memory=pin,
        )
    step = tudui_step(device) if how.get("step") else None
    rates, first_batch = [], []
    for _ in range(epochs):
        synchronize(device)
        start = time.perf_counter()
        seen, first = 0, None
        for images, labels in loader:
            if first is None:
                first = time.perf_counter() - start
            images = images.to(device, non_blocking=pin)
            labels = labels.to(device, non_blocking=pin)
            if step is not None:
                step(images, labels)
            seen += labels.size(0)
        synchronize(device)
        rates.append(seen / (time.perf_counter() - start))
        first_batch.append(first)
    record = {
        "workers": how.get("workers"),
        "persistent": bool(how.get("persistent")),
        "pin_memory": pin,
        "normalize": bool(how.get("normalize")),
        "training_step": step is not None,
        "data_on_device": bool(how.get("device_data")),
        "epoch_images_per_second": [round(r) for r in rates],
        "first_batch_seconds": [round(s, 3) for s in first_batch],
        "images_per_second_after_the_first_epoch": round(statistics.median(rates[1:]))
        if epochs > 1
        else None,
    }
    print(
        f"{name:58} epochs: {', '.join(f'{r:,.0f}' for r in rates)} images/s; first batch after "
        f"{', '.join(f'{s:.2f}' for s in first_batch)} s",
        flush=True,
    )
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--epochs", type=int, default=2, help="epochs per setting (the first starts the workers)"
    )
    parser.add_argument("--train-size", type=int, default=None, help="training images (default all 50,000)")
    parser.add_argument("--only", action="append", default=None, help="settings to run (default all)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be 1 or more")
    device = pick_device()
    if device.type == "cuda":
        torch.zeros(1, device=device)  # CUDA started before the workers fork, as in a notebook
    cores = _cores()
    chosen = settings(cores)
    unknown = sorted(set(args.only or ()) - set(chosen))
    if unknown:
        parser.error(f"no setting named {', '.join(map(repr, unknown))}; the settings: {', '.join(chosen)}")
    record = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cores": cores,
        "batch_size": 64,
        "settings": {},
    }
    print(f"{record['device']}, torch {torch.__version__}, {cores} cores", flush=True)
    for name, how in chosen.items():
        if args.only and name not in args.only:
            continue  # --only: the named settings, in this order
        record["settings"][name] = run_setting(name, how, args.train_size, device, args.epochs)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
