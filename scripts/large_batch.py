"""Where the linear scaling rule stops working for Tudui: large batches, with and without the recipe.

``python scripts/large_batch.py`` trains ``Tudui`` on the training set (all of it by default) with the
fast path's loop (``helpers.fastpath.train_epoch``: the data on the device, ``channels_last``, the
mixed precision ``choose_precision`` picks, SGD without momentum as the seed's, or Adam), once per
configuration and seed, and records after every epoch the test accuracy and the training loss, and whether
the run diverged (a NaN or infinite loss or weights). Configurations are ``KIND@BATCH``:

- ``plain@512``: linear scaling only: the rule's rate (0.01 x 512/64 = 0.08) from the first step,
  constant (what the first H100 bench ran);
- ``recipe@512``: ``LargeBatchSchedule``: the same peak after a one-epoch warm-up, then a decay
  (``--decay``, cosine by default) to 0;
- ``recipe@2048``, ``recipe@8192``: the recipe at the batches the H100 probe found fastest (the rule
  gives lr 0.32 and 1.28);
- ``adam@2048``, ``adam@8192``: Adam with the same warm-up and decay, its peak rate scaled by the
  square root of the batch from 0.001 at batch 128 (``ADAM_BASE_LR``): 0.004 and 0.008;
- ``adamplain@2048``: Adam at that peak rate from the first step, constant (the bench's control
  for Adam's recipe).

The seed pipeline's accuracy to compare with is read from ``results/data-calibration.json`` (seed
000's recipe, batch 64, lr 0.01, 10 epochs on the whole stand-in, measured by
``scripts/calibrate_data.py``). Writes ``results/large-batch-<device>.json`` (``-quick`` for
``--quick``, ``-NAME`` for ``--name NAME``). ``--seeds 0,1,2`` trains each configuration once per
seed (initial weights and shuffling). On a 2-core CPU the default run takes about 15 minutes; on a
GPU, seconds.
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

from helpers.data import STAND_IN_VERSION, SyntheticCIFAR10, load_cifar10
from helpers.devices import pick_device
from helpers.fastpath import (
    ADAM_BASE_BATCH_SIZE,
    ADAM_BASE_LR,
    Autocast,
    DeviceLoader,
    LargeBatchSchedule,
    adam,
    choose_precision,
    dataset_tensors,
    grad_scaler,
    sgd,
    train_epoch,
)
from helpers.models import Tudui
from helpers.timing import Stopwatch, result_stem, results_dir
from helpers.train import evaluate

DEFAULT_CONFIGS = "plain@512,recipe@512,recipe@2048,recipe@8192"
KINDS = ("plain", "recipe", "adam", "adamplain")


def parse_config(text: str) -> tuple[str, int]:
    kind, _, batch = text.partition("@")
    if kind not in KINDS or not batch.isdigit() or int(batch) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a configuration is KIND@BATCH, KIND one of {', '.join(KINDS)}, e.g. adam@2048"
        )
    return kind, int(batch)


def parse_seeds(text: str) -> list[int]:
    seeds = [part.strip() for part in text.split(",") if part.strip()]
    if not seeds or not all(seed.isdigit() for seed in seeds):
        raise argparse.ArgumentTypeError(
            f"{text!r}: --seeds takes whole numbers separated by commas, e.g. 0,1,2"
        )
    return [int(seed) for seed in seeds]


def seed_reference(root: Path) -> dict | None:
    """Seed 000's recipe on the whole stand-in, as scripts/calibrate_data.py measured it."""
    path = root / "data-calibration.json"
    if not path.is_file():
        return None
    calibration = json.loads(path.read_text())
    run = calibration.get("runs", {}).get("tudui_seed000")
    if not run:
        return None
    return {
        "source": f"results/data-calibration.json (tudui_seed000, measured {calibration['date'][:10]})",
        "batch_size": run["batch_size"],
        "lr": run["lr"],
        "epochs": run["epochs"],
        "train_size": run["train_size"],
        "test_size": run["test_size"],
        "test_accuracy": run["test_accuracy"],
        "test_accuracy_by_epoch": run["test_accuracy_by_epoch"],
    }


def train(kind, batch, data, device, args, precision, seed) -> dict:
    torch.manual_seed(seed)
    model = Tudui().to(device, memory_format=torch.channels_last)
    x, y = data["train"]
    loader = DeviceLoader(
        x, y, batch_size=batch, shuffle=True, generator=torch.Generator(device).manual_seed(seed)
    )
    if kind == "plain":
        schedule = LargeBatchSchedule(batch, len(loader), args.epochs, warmup_epochs=0, decay="none")
    elif kind == "recipe":
        schedule = LargeBatchSchedule(
            batch,
            len(loader),
            args.epochs,
            decay=args.decay,
            warmup_epochs=args.warmup_epochs,
            max_lr=args.max_lr,
        )
    else:  # Adam: its recipe, or (adamplain) its peak rate from the first step, constant
        shape = (
            {"warmup_epochs": 0, "decay": "none"}
            if kind == "adamplain"
            else {"decay": args.decay, "warmup_epochs": args.warmup_epochs, "max_lr": args.max_lr}
        )
        schedule = LargeBatchSchedule(
            batch,
            len(loader),
            args.epochs,
            base_batch_size=ADAM_BASE_BATCH_SIZE,
            base_lr=ADAM_BASE_LR,
            scaling="sqrt",
            **shape,
        )
    build = adam if kind.startswith("adam") else sgd
    optimizer, optimizer_kind = build(model.parameters(), schedule.lr_at(0), fused=True)
    net = model if precision.dtype is None else Autocast(model, precision.dtype)
    scaler = grad_scaler(device) if precision.scaler else None
    record = {
        "config": f"{kind}@{batch}",
        "seed": seed,
        "schedule": schedule.describe(),
        "optimizer": f"{'Adam' if kind.startswith('adam') else 'SGD'}, {optimizer_kind}",
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
                stats = train_epoch(
                    net,
                    loader,
                    optimizer,
                    device,
                    schedule=schedule,
                    first_step=epoch * len(loader),
                    scaler=scaler,
                )
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
            f"  epoch {epoch + 1}: lr {stats.lr:.4g}, train loss {stats.loss:.4f}, "
            f"test accuracy {accuracy:.1%}, {watch.seconds:.1f} s",
            flush=True,
        )
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configs", default=DEFAULT_CONFIGS, help=f"comma-separated (default {DEFAULT_CONFIGS})"
    )
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--train-size", type=int, help="training images (default all)")
    parser.add_argument("--test-size", type=int, help="test images (default all)")
    parser.add_argument("--decay", choices=("cosine", "linear", "none"), default="cosine")
    parser.add_argument(
        "--warmup-epochs", type=float, default=1.0, help="the recipes' warm-up, in epochs (default 1)"
    )
    parser.add_argument("--max-lr", type=float, help="cap the recipes' scaled peak rate (default: no cap)")
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        default=[0],
        help="initial weights and shuffling: one run of each configuration per seed (default 0)",
    )
    parser.add_argument("--name", default="", help="added to the result's file name: large-batch-NAME-...")
    parser.add_argument("--device", help="default: the best available")
    parser.add_argument("--quick", action="store_true", help="name the result -quick (for tests)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the result (default results/)")
    args = parser.parse_args(argv)
    configs = [parse_config(text) for text in args.configs.split(",") if text]
    began = time.perf_counter()
    device = pick_device(args.device)
    precision = choose_precision(device)
    trainset = load_cifar10(train=True, size=args.train_size)
    testset = load_cifar10(train=False, size=args.test_size)
    images, labels = dataset_tensors(trainset, device, memory_format=torch.channels_last)
    data = {
        "train": (images, labels),
        "test": DeviceLoader(*dataset_tensors(testset, device), batch_size=1000),
    }
    print(f"Tudui on {len(trainset):,} training images, {precision.name} ({precision.why})", flush=True)
    runs = [
        train(kind, batch, data, device, args, precision, seed)
        for kind, batch in configs
        for seed in args.seeds
    ]
    out = args.out if args.out is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine()
    if device.type == "cpu":
        capabilities = getattr(torch.cpu, "get_capabilities", None)
        name = (capabilities().get("cpu_name") if capabilities else None) or name
    result = {
        "schema": 1,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": {"type": device.type, "name": name},
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
        "host": {
            "logical_cores": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "load_average": os.getloadavg(),
        },
        "settings": {
            "train_size": len(trainset),
            "test_size": len(testset),
            "data": "synthetic stand-in" if isinstance(trainset, SyntheticCIFAR10) else "CIFAR-10",
            "stand_in": STAND_IN_VERSION if isinstance(trainset, SyntheticCIFAR10) else None,
            "epochs": args.epochs,
            "seeds": args.seeds,
            "decay": args.decay,
            "warmup_epochs": args.warmup_epochs,
            "max_lr": args.max_lr,
            "precision": precision.name,
            "memory_format": "channels_last",
            "optimizer": "SGD without momentum (plain, recipe); Adam (adam, adamplain)",
        },
        "seed_pipeline_reference": seed_reference(results_dir()),
        "runs": runs,
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "wall_seconds": time.perf_counter() - began,
    }
    path = out / (
        result_stem(device.type, name, quick=args.quick).replace(
            "bench-", f"large-batch-{args.name}-" if args.name else "large-batch-", 1
        )
        + ".json"
    )
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    reference = result["seed_pipeline_reference"]
    if reference:
        print(
            f"seed pipeline ({reference['source']}): {reference['test_accuracy']:.1%} "
            f"after {reference['epochs']} epochs"
        )
    for run in runs:
        last = run["epoch_test_accuracy"][-1] if run["epoch_test_accuracy"] else None
        print(
            f"{run['config']} (seed {run['seed']}): "
            + (f"NON-FINITE at {run['error'].split(':')[0]}" if run["status"] != "ok" else "finite")
            + (f", last test accuracy {last:.1%}" if last is not None else "")
        )
    print(f"wrote {path} ({result['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
