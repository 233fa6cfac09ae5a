"""Benchmark: training throughput of the seeds' pipeline against the fast path of 06_performance.

Run ``make bench`` (or ``.venv/bin/python scripts/bench.py``) on whatever device is present; add
``--quick`` for a short run. It trains ``Tudui`` several times with each pipeline on the same data,
from the same initial weights, alternating the two so that drift in the machine's speed hits both:

- the seed pipeline: a ``DataLoader`` over PIL images with ``ToTensor`` per sample, batch 64,
  SGD lr 0.01, float32, as seed 000 trains (shuffled, which seed 000 forgets);
- the fast path: the dataset on the device as one tensor (``helpers.fastpath.DeviceLoader``,
  shuffled with ``randperm`` on the device), batch 512 with the learning rate scaled by 512/64,
  channels_last, bf16 autocast where the device computes bf16 natively, ``torch.compile`` on CUDA;
- the fast path with the seed's batches: the same, but batch 64, lr 0.01 and the very batches of
  the seed pipeline (the same shuffling generator), so that its accuracy shows what the fast
  machinery changes by itself, and the batch-512 run what the larger batch changes.

Both use ``helpers.train.train_one_epoch`` (no ``.item()`` per step). Throughput is measured over
the epochs after the first (which pays warm-up and compilation), with ``helpers.timing.Stopwatch``.
Then each model's test accuracy is measured on the same test images. Also recorded: a training
loop timed with and without waiting for the device, and images/s of a training step for
``CifarNet`` and ``Tudui`` across batch sizes on the CPU and on the accelerator.

Writes ``results/<name>.json`` and ``results/<name>.png``, the name made by
``helpers.timing.result_stem`` from the device (and ``-quick`` for a short run), so a CPU run never
overwrites a GPU result.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms

from helpers.data import STAND_IN_VERSION, SyntheticCIFAR10, load_cifar10
from helpers.devices import pick_device
from helpers.fastpath import Autocast, DeviceLoader, bf16_supported, dataset_tensors
from helpers.models import CifarNet, Tudui
from helpers.timing import Stopwatch, autorange, describe_result, result_stem, results_dir, synchronize
from helpers.train import evaluate, train_one_epoch

SEED = 0
SEED_BATCH, SEED_LR = 64, 0.01
FAST_BATCH = 512
PATHS = ["seed_pipeline", "fast_same_batches", "fast_path"]
TARGETS = {
    "cpu": {"ratio_at_least": 1.5, "accuracy_within_points": 1.0},
    "cuda": {
        "ratio_at_least": 30.0,
        "fast_images_per_second_at_least": 200_000,
        "accuracy_within_points": 1.0,
    },
}


def device_name(device: torch.device) -> str:
    """The device's name as the driver (CUDA) or the CPU's identification reports it."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        capabilities = getattr(torch.cpu, "get_capabilities", None)
        name = capabilities().get("cpu_name") if capabilities else None
        return str(name or platform.processor() or platform.machine())
    return str(device)


def settings_for(device: torch.device, args: argparse.Namespace) -> dict:
    on_cpu = device.type == "cpu"
    if args.quick:
        train_size, test_size, epochs, repeats = 2_048, 1_000, 2, 2
    else:
        train_size, test_size, epochs, repeats = (10_000 if on_cpu else None), None, (3 if on_cpu else 5), 3
    train_size = args.train_size if args.train_size is not None else train_size
    test_size = args.test_size if args.test_size is not None else test_size
    epochs = args.epochs if args.epochs is not None else epochs
    repeats = args.repeats if args.repeats is not None else repeats
    if epochs < 2:
        raise SystemExit(
            "--epochs must be 2 or more: the first epoch is warm-up, throughput is timed after it"
        )
    if repeats < 1:
        raise SystemExit("--repeats must be 1 or more")
    bf16 = bf16_supported(device)
    return {
        "quick": args.quick,
        "epochs": epochs,
        "repeats": repeats,
        "train_size": train_size,  # None: all of it (filled in once the data is loaded)
        "test_size": test_size,
        "timed": "epochs 2 and later (the first is warm-up); images/s = images / Stopwatch seconds",
        "seed_pipeline": {
            "loader": "DataLoader over PIL images, ToTensor per sample, shuffle=True, num_workers=0",
            "batch_size": SEED_BATCH,
            "lr": SEED_LR,
            "precision": "float32",
            "memory_format": "contiguous",
            "compile": False,
        },
        "fast_path": {
            "loader": "DeviceLoader: the dataset on the device as one tensor, shuffled with randperm there",
            "batch_size": FAST_BATCH,
            "lr": SEED_LR * FAST_BATCH / SEED_BATCH,
            "precision": "bf16 autocast" if bf16 else "float32 (no native bf16 on this device)",
            "memory_format": "channels_last",
            "compile": device.type == "cuda" and not args.no_compile,
        },
        "fast_same_batches": {
            "loader": "DeviceLoader, shuffled by the seed pipeline's CPU generator: the same batches",
            "batch_size": SEED_BATCH,
            "lr": SEED_LR,
            "precision": "bf16 autocast" if bf16 else "float32 (no native bf16 on this device)",
            "memory_format": "channels_last",
            "compile": device.type == "cuda" and not args.no_compile,
        },
        "optimizer": "SGD, no momentum (as seed 000)",
        "threads": torch.get_num_threads(),
    }


def train_timed(model, net, loader, lr, device, epochs, images):
    """Train ``net`` (``model``, maybe wrapped) for ``epochs``; return seconds per epoch."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    seconds = []
    for epoch in range(epochs):
        with Stopwatch(device) as watch:
            train_one_epoch(net, loader, loss_fn, optimizer, device, epoch=epoch, progress=False)
        seconds.append(watch.seconds)
        print(
            f"    epoch {epoch + 1}: {watch.seconds:6.2f} s, {images / watch.seconds:10,.0f} images/s",
            flush=True,
        )
    return seconds


def one_run(path: str, repeat: int, data: dict, settings: dict, device: torch.device) -> dict:
    torch.manual_seed(SEED + repeat)  # the same initial weights for every pipeline in this repeat
    model = Tudui().to(device)
    config = settings[path]
    if path == "seed_pipeline":
        generator = torch.Generator().manual_seed(SEED + repeat)
        loader = DataLoader(data["train_dataset"], batch_size=SEED_BATCH, shuffle=True, generator=generator)
        net = model
    else:
        model = model.to(memory_format=torch.channels_last)
        if path == "fast_path":
            generator = torch.Generator(device).manual_seed(SEED + repeat)
        else:  # the seed pipeline's generator: the same batches in the same order
            generator = torch.Generator().manual_seed(SEED + repeat)
        loader = DeviceLoader(
            *data["train_tensors"], batch_size=config["batch_size"], shuffle=True, generator=generator
        )
        net = Autocast(model) if config["precision"].startswith("bf16") else model
        if config["compile"]:
            net = torch.compile(net, dynamic=False)  # the last, smaller batch gets its own graph
    images = data["train_size"]
    print(f"  run {repeat + 1}, {path.replace('_', ' ')}:", flush=True)
    seconds = train_timed(model, net, loader, config["lr"], device, settings["epochs"], images)
    _, accuracy = evaluate(model, data["test_loader"], nn.CrossEntropyLoss(), device, progress=False)
    timed = seconds[1:]
    return {
        "epoch_seconds": seconds,
        "images_per_second": images * len(timed) / sum(timed),
        "test_accuracy": accuracy,
    }


def timing_demo(device: torch.device, steps: int, batch_size: int) -> dict:
    """A training loop of Tudui timed without and with waiting for the device."""
    torch.manual_seed(SEED)
    model = Tudui().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.rand(batch_size, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch_size,), device=device)

    def step():
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(3):
        step()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    unsynchronized = time.perf_counter() - start  # what time.time() around the loop reports
    synchronize(device)
    waited = time.perf_counter() - start
    with Stopwatch(device) as watch:
        for _ in range(steps):
            step()
    return {
        "steps": steps,
        "batch_size": batch_size,
        "unsynchronized_seconds": unsynchronized,
        "same_loop_after_synchronize_seconds": waited,
        "stopwatch_seconds": watch.seconds,
    }


def sweep(device: torch.device, batch_sizes: list[int], min_run_time: float) -> list[dict]:
    """Images/s of a training step (forward, backward, SGD step) on random data, per device, model, batch."""
    devices = [torch.device("cpu")] + ([device] if device.type != "cpu" else [])
    rows = []
    for where in devices:
        for name, factory in (("CifarNet", CifarNet), ("Tudui", Tudui)):
            torch.manual_seed(SEED)
            model = factory().to(where)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for batch_size in batch_sizes:
                x = torch.rand(batch_size, 3, 32, 32, device=where)
                y = torch.randint(0, 10, (batch_size,), device=where)

                def step(model=model, optimizer=optimizer, x=x, y=y):
                    loss = nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

                measurement = autorange(step, min_run_time=min_run_time)
                rows.append(
                    {
                        "device": str(where),
                        "model": name,
                        "batch_size": batch_size,
                        "images_per_second": batch_size / measurement.median,
                        "seconds_per_step_median": measurement.median,
                        "seconds_per_step_iqr": measurement.iqr,
                    }
                )
                print(
                    f"  {str(where):6s} {name:8s} batch {batch_size:5d}: "
                    f"{rows[-1]['images_per_second']:12,.0f} images/s"
                )
    return rows


def spread(values: list[float]) -> dict:
    return {
        "first_run": values[0],
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": values,
    }


def plot(result: dict, png_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = result["summary"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    labels = {
        "seed_pipeline": "seed pipeline\nDataLoader, PIL,\nbatch 64",
        "fast_same_batches": "fast path,\nthe seed's batches\n(64)",
        "fast_path": "fast path\nbatch 512",
    }
    colours = {"seed_pipeline": "tab:gray", "fast_same_batches": "tab:olive", "fast_path": "tab:green"}
    accuracy = summary["test_accuracy"]
    for i, pipeline in enumerate(PATHS):
        values = summary["images_per_second"][pipeline]["runs"]
        median = summary["images_per_second"][pipeline]["median"]
        ax.bar(i, median, color=colours[pipeline], alpha=0.6)
        ax.scatter([i] * len(values), values, color="black", zorder=3, s=14)
        ax.annotate(
            f"test acc. {accuracy[pipeline]['mean']:.1%}",
            (i, median),
            ha="center",
            va="bottom",
            fontsize=10,
            xytext=(0, 3),
            textcoords="offset points",
        )
    ax.set_xticks(range(len(PATHS)), [labels[p] for p in PATHS], fontsize=10)
    ax.set_ylabel("training images per second (bars: median, dots: runs)")
    ratio = summary["ratio"]
    ax.set_title(
        f"Tudui: fast path {ratio['first_run']:.1f}x the seed pipeline in run 1, "
        f"{ratio['min']:.1f}x to {ratio['max']:.1f}x over {len(ratio['runs'])} runs",
        fontsize=10,
    )
    ax = axes[1]
    rows = result.get("sweep", [])
    for where in sorted({r["device"] for r in rows}):
        for name, style in (("CifarNet", "o-"), ("Tudui", "s--")):
            points = [r for r in rows if r["device"] == where and r["model"] == name]
            if points:
                ax.plot(
                    [p["batch_size"] for p in points],
                    [p["images_per_second"] for p in points],
                    style,
                    label=f"{name} on {where}",
                )
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="images per second (one training step)")
    sizes = sorted({r["batch_size"] for r in rows})
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.minorticks_off()
    ax.set_title("training step throughput by batch size (random data)")
    ax.legend(fontsize=10)
    device = result["device"]
    fig.suptitle(
        f"{device['name']} ({device['type']}), torch {result['versions']['torch']}, {result['date'][:10]}"
        + (" (quick run)" if result["settings"]["quick"] else "")
    )
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (2,048 images, 2 epochs, 2 runs)")
    parser.add_argument("--repeats", type=int, help="runs of each pipeline (default 3, quick 2)")
    parser.add_argument(
        "--epochs", type=int, help="epochs per run, 2 or more (default CPU 3, GPU 5, quick 2)"
    )
    parser.add_argument(
        "--train-size", type=int, help="training images (default CPU 10,000, GPU all, quick 2,048)"
    )
    parser.add_argument("--test-size", type=int, help="test images (default all, quick 1,000)")
    parser.add_argument("--device", help="device to measure (default: the best available, see pick_device)")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out of the fast path")
    parser.add_argument("--out", type=Path, default=None, help="folder for the results (default results/)")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    device = pick_device(args.device)
    settings = settings_for(device, args)
    out = args.out if args.out is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()

    to_tensor = transforms.ToTensor()
    train_dataset = load_cifar10(train=True, transform=to_tensor, size=settings["train_size"])
    test_dataset = load_cifar10(train=False, transform=to_tensor, size=settings["test_size"])
    settings["train_size"], settings["test_size"] = len(train_dataset), len(test_dataset)
    settings["data"] = "synthetic stand-in" if isinstance(train_dataset, SyntheticCIFAR10) else "CIFAR-10"
    if isinstance(train_dataset, SyntheticCIFAR10):
        settings["stand_in"] = STAND_IN_VERSION  # which version of the stand-in it trained on
    train_tensors = dataset_tensors(train_dataset, device, memory_format=torch.channels_last)
    test_loader = DeviceLoader(*dataset_tensors(test_dataset, device), batch_size=1000)
    data = {
        "train_dataset": train_dataset,
        "train_tensors": train_tensors,
        "test_loader": test_loader,
        "train_size": len(train_dataset),
    }
    name = device_name(device)
    print(f"Benchmark on {name} ({device}): {json.dumps(settings['fast_path'])}", flush=True)

    runs = []
    for repeat in range(settings["repeats"]):
        order = PATHS[repeat % 3 :] + PATHS[: repeat % 3]  # each pipeline in turn goes first
        run = {path: one_run(path, repeat, data, settings, device) for path in order}
        seed_ips = run["seed_pipeline"]["images_per_second"]
        run["ratio"] = run["fast_path"]["images_per_second"] / seed_ips
        run["ratio_same_batches"] = run["fast_same_batches"]["images_per_second"] / seed_ips
        print(
            f"  run {repeat + 1}: fast path / seed pipeline = {run['ratio']:.2f}x "
            f"(with the seed's batches {run['ratio_same_batches']:.2f}x)",
            flush=True,
        )
        runs.append(run)

    print("Timing a training loop with and without waiting for the device:", flush=True)
    demo = timing_demo(device, steps=5 if args.quick else 20, batch_size=64 if args.quick else FAST_BATCH)
    print(f"  {json.dumps(demo)}")
    print("Training-step throughput by batch size:", flush=True)
    rows = sweep(device, [16, 64] if args.quick else [16, 64, 256, 1024], 0.05 if args.quick else 0.5)

    accuracy = {path: [r[path]["test_accuracy"] for r in runs] for path in PATHS}
    mean = {path: statistics.mean(values) for path, values in accuracy.items()}
    difference = {path: (mean[path] - mean["seed_pipeline"]) * 100 for path in PATHS[1:]}
    summary = {
        "images_per_second": {path: spread([r[path]["images_per_second"] for r in runs]) for path in PATHS},
        "ratio": spread([r["ratio"] for r in runs]),
        "ratio_same_batches": spread([r["ratio_same_batches"] for r in runs]),
        "test_accuracy": {path: {"runs": accuracy[path], "mean": mean[path]} for path in PATHS},
        "accuracy_difference_points": difference,
    }
    target = TARGETS.get(device.type, {})
    checks = {"judged_on": "the median over the runs, and the mean test accuracies"}
    if "ratio_at_least" in target:
        checks["ratio"] = {
            "target": target["ratio_at_least"],
            "met": summary["ratio"]["median"] >= target["ratio_at_least"],
        }
    if "fast_images_per_second_at_least" in target:
        goal = target["fast_images_per_second_at_least"]
        checks["fast_images_per_second"] = {
            "target": goal,
            "met": summary["images_per_second"]["fast_path"]["median"] >= goal,
        }
    if "accuracy_within_points" in target:
        goal = target["accuracy_within_points"]
        for path in PATHS[1:]:
            checks[f"accuracy_{path}"] = {"target_points": goal, "met": abs(difference[path]) <= goal}

    result = {
        "schema": 1,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": {"type": device.type, "name": name, "index": device.index},
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
            "python": platform.python_version(),
        },
        "host": {
            "platform": platform.platform(),
            "logical_cores": os.cpu_count(),
            "load_average_start": load_start,
            "load_average_end": os.getloadavg(),
        },
        "settings": settings,
        "runs": runs,
        "summary": summary,
        "targets": checks,
        "timing_demo": demo,
        "sweep": rows,
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
    }
    result["wall_seconds"] = time.perf_counter() - began
    stem = result_stem(device.type, name, quick=args.quick)
    json_path, png_path = out / f"{stem}.json", out / f"{stem}.png"
    json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(result, png_path)
    print()
    print(describe_result(result))
    print(f"targets ({device.type}): {json.dumps(checks)}")
    print(f"wall time {result['wall_seconds']:.0f} s; wrote {json_path} and {png_path}")
    return result


if __name__ == "__main__":
    main()
