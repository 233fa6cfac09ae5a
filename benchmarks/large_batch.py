"""Where the linear scaling rule stops working for Tudui: large batches, with and without the
recipe.

    python benchmarks/large_batch.py        # SGD: plain@512 ... recipe@8192
    python benchmarks/large_batch.py --configs adam@2048,adam@8192 --epochs 15 --seeds 0,1,2 \
        --name adam

Trains ``Tudui`` with the fast path's loop (data on the device, ``channels_last``, the mixed
precision ``choose_precision`` picks) once per configuration and seed, and records after every
epoch the test accuracy, the training loss and whether the run became non-finite. A configuration
is ``KIND@BATCH``: ``plain`` (SGD, the scaled rate from the first step, constant), ``recipe``
(SGD with ``LargeBatchSchedule``'s warm-up and decay), ``adam`` (Adam with the same warm-up and
decay, its rate scaled by the square root of the batch) or ``adamplain`` (Adam, constant). The
tutorial loop's accuracy to compare with comes from ``results/data-calibration.json``. Writes
``results/large-batch[-NAME]-<device>[-quick].json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (  # noqa: E402
    ADAM_BASE_BATCH_SIZE,
    ADAM_BASE_LR,
    LargeBatchSchedule,
    device_name,
    make_optimizer,
    result_stem,
    scheduled,
)

from helpers.data import load_cifar10  # noqa: E402
from helpers.devices import pick_device  # noqa: E402
from helpers.fastpath import (  # noqa: E402
    Autocast,
    DeviceLoader,
    choose_precision,
    dataset_tensors,
    fast_path_epoch,
    grad_scaler,
)
from helpers.models import Tudui  # noqa: E402
from helpers.results import results_dir  # noqa: E402
from helpers.standin import STAND_IN_VERSION, SyntheticCIFAR10  # noqa: E402
from helpers.timing import Stopwatch  # noqa: E402
from helpers.train import evaluate  # noqa: E402

DEFAULT_CONFIGS = "plain@512,recipe@512,recipe@2048,recipe@8192"
KINDS = ("plain", "recipe", "adam", "adamplain")


def parse_config(text: str) -> tuple[str, int]:
    """``"adam@2048"`` -> ``("adam", 2048)``; an ``argparse`` error naming the form otherwise."""
    kind, _, batch = text.partition("@")
    if kind not in KINDS or not batch.isdigit() or int(batch) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a configuration is KIND@BATCH, KIND one of {', '.join(KINDS)}, "
            "e.g. adam@2048"
        )
    return kind, int(batch)


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``; an ``argparse`` error naming the form otherwise."""
    seeds = [part.strip() for part in text.split(",") if part.strip()]
    if not seeds or not all(seed.isdigit() for seed in seeds):
        raise argparse.ArgumentTypeError(
            f"{text!r}: --seeds takes whole numbers separated by commas, e.g. 0,1,2"
        )
    return [int(seed) for seed in seeds]


def baseline_reference(root: Path) -> dict | None:
    """The tutorial's Tudui recipe on the whole stand-in, from ``data-calibration.json``, or
    ``None``."""
    path = root / "data-calibration.json"
    if not path.is_file():
        return None
    calibration = json.loads(path.read_text())
    run = calibration.get("runs", {}).get("tudui_tutorial")
    if not run:
        return None
    keys = (
        "batch_size",
        "lr",
        "epochs",
        "train_size",
        "test_size",
        "test_accuracy",
        "test_accuracy_by_epoch",
    )
    return {"source": f"results/data-calibration.json ({calibration['date'][:10]})"} | {
        k: run[k] for k in keys
    }


def schedule_for(kind: str, batch: int, steps: int, args: argparse.Namespace) -> LargeBatchSchedule:
    """The learning-rate schedule of one configuration."""
    shape = (
        {"warmup_epochs": 0, "decay": "none"}
        if kind.endswith("plain")
        else {"warmup_epochs": args.warmup_epochs, "decay": args.decay, "max_lr": args.max_lr}
    )
    if kind.startswith("adam"):
        shape |= {
            "base_batch_size": ADAM_BASE_BATCH_SIZE,
            "base_lr": ADAM_BASE_LR,
            "scaling": "sqrt",
        }
    return LargeBatchSchedule(batch, steps, args.epochs, **shape)


def train(
    kind: str, batch: int, data: dict, device: torch.device, *, args, precision, seed
) -> dict:
    """One configuration from one seed: every epoch's accuracy and loss, or where it became
    non-finite."""
    torch.manual_seed(seed)
    model = Tudui().to(device, memory_format=torch.channels_last)
    generator = torch.Generator(device).manual_seed(seed)
    loader = DeviceLoader(*data["train"], batch_size=batch, shuffle=True, generator=generator)
    schedule = schedule_for(kind, batch, len(loader), args)
    name = "adam" if kind.startswith("adam") else "sgd"
    optimizer = make_optimizer(name, model.parameters(), schedule.lr_at(0), fused=True)
    net = model if precision.dtype is None else Autocast(model, precision.dtype)
    scaler = grad_scaler(device) if precision.scaler else None
    record = {
        "config": f"{kind}@{batch}",
        "seed": seed,
        "schedule": schedule.describe(),
        "optimizer": f"{'Adam' if name == 'adam' else 'SGD'}, fused",
        "status": "ok",
        "error": None,
        "epoch_seconds": [],
        "epoch_train_loss": [],
        "epoch_test_accuracy": [],
    }
    print(f"{kind}@{batch}, seed {seed}: {schedule.describe()}", flush=True)
    for epoch in range(args.epochs):
        try:
            with Stopwatch(device) as watch:
                first = epoch * len(loader)
                batches = scheduled(loader, optimizer, schedule, first, device)
                stats = fast_path_epoch(net, batches, optimizer, device, scaler=scaler)
        except FloatingPointError as error:
            record["status"] = "non-finite"
            record["error"] = f"epoch {epoch + 1}: {error}"
            print(f"  epoch {epoch + 1}: NON-FINITE ({error})", flush=True)
            break
        _, accuracy = evaluate(model, data["test"], nn.CrossEntropyLoss(), device, progress=False)
        record["epoch_seconds"].append(watch.seconds)
        record["epoch_train_loss"].append(stats.loss)
        record["epoch_test_accuracy"].append(accuracy)
        print(
            f"  epoch {epoch + 1}: loss {stats.loss:.4f}, test accuracy {accuracy:.1%}", flush=True
        )
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add(
        "--configs",
        type=lambda text: [parse_config(part) for part in text.split(",") if part],
        default=DEFAULT_CONFIGS,
        help=f"comma-separated KIND@BATCH (default {DEFAULT_CONFIGS})",
    )
    add("--epochs", type=int, default=10)
    add("--train-size", type=int, help="training images (default all)")
    add("--test-size", type=int, help="test images (default all)")
    add("--decay", choices=("cosine", "linear", "none"), default="cosine")
    add(
        "--warmup-epochs",
        type=float,
        default=1.0,
        help="the recipes' warm-up, in epochs (default 1)",
    )
    add("--max-lr", type=float, help="cap the recipes' scaled peak rate")
    add(
        "--seeds",
        type=parse_seeds,
        default=[0],
        help="one run of each configuration per seed (default 0)",
    )
    add("--name", default="", help="added to the file name: large-batch-NAME-...")
    add("--device", help="default: the best available")
    add("--quick", action="store_true", help="name the result -quick (it is not committed)")
    add("--out", type=Path, help="folder for the result (default results/)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    device = pick_device(args.device)
    precision = choose_precision(device)
    trainset = load_cifar10(train=True, size=args.train_size)
    testset = load_cifar10(train=False, size=args.test_size)
    data = {
        "train": dataset_tensors(trainset, device, memory_format=torch.channels_last),
        "test": DeviceLoader(*dataset_tensors(testset, device), batch_size=1000),
    }
    print(f"Tudui on {len(trainset):,} training images, {precision.name}", flush=True)
    runs = [
        train(kind, batch, data, device, args=args, precision=precision, seed=seed)
        for kind, batch in args.configs
        for seed in args.seeds
    ]
    synthetic = isinstance(trainset, SyntheticCIFAR10)
    name = device_name(device)
    result = {
        "schema": 1,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": {"type": device.type, "name": name},
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
        "host": {"logical_cores": os.cpu_count(), "threads": torch.get_num_threads()},
        "settings": {
            "train_size": len(trainset),
            "test_size": len(testset),
            "data": "synthetic stand-in" if synthetic else "CIFAR-10",
            "stand_in": STAND_IN_VERSION if synthetic else None,
            "epochs": args.epochs,
            "seeds": args.seeds,
            "decay": args.decay,
            "warmup_epochs": args.warmup_epochs,
            "max_lr": args.max_lr,
            "precision": precision.name,
        },
        # the key the committed records and 06_performance read: the tutorial's loop, as calibrated
        "tutorial_loop_reference": baseline_reference(results_dir()),
        "runs": runs,
        "command": " ".join(["large_batch.py", *(argv if argv is not None else sys.argv[1:])]),
        "wall_seconds": time.perf_counter() - began,
    }
    out = args.out if args.out is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    prefix = f"large-batch-{args.name}" if args.name else "large-batch"
    path = out / f"{result_stem(device.type, name, quick=args.quick, prefix=prefix)}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for run in runs:
        last = run["epoch_test_accuracy"][-1] if run["epoch_test_accuracy"] else None
        ending = (
            "NON-FINITE"
            if run["status"] != "ok"
            else f"{last:.1%}"
            if last is not None
            else "no epoch"
        )
        print(f"{run['config']} (seed {run['seed']}): {ending}")
    print(f"wrote {path} ({result['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
