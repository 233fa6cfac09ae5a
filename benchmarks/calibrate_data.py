"""Calibrate the synthetic stand-in against CIFAR-10: train the course's recipes on it, on this
machine.

    python benchmarks/calibrate_data.py --threads 1       # the full calibration, on 50,000 images
    python benchmarks/calibrate_data.py --generation-only # time the generation, on a quiet machine
    python benchmarks/calibrate_data.py --quick           # a smoke run on 5,000 images

The stand-in (``helpers.standin.make_synthetic_cifar10``) is meant to be about as hard as
CIFAR-10 for the course's models and budgets. On the CPU and the full stand-in this script
measures: how long generating it takes; the PyTorch tutorial's ``CifarNet`` recipe and the
tutorial's ``Tudui`` recipe, each against a target range; a better recipe and a bigger model,
which should beat the tutorial's by 10 points or more; two linear baselines that should do much
worse; which classes the tutorial's run confuses (the stand-in's look-alike pairs should lead);
and every notebook's recipe on its CPU and quick-mode budgets. ``_targets`` holds the targets;
the exit status is 1 when one is missed.

Training holds the images as one tensor and shuffles with ``torch.randperm``: the notebooks'
arithmetic, not their random order. Writes ``results/data-calibration.json`` (``--quick``:
``data-calibration-quick.json``, not committed; ``--out`` for another folder). It never downloads
CIFAR-10. On a shared machine train on one thread (``--threads 1``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from helpers.models import CifarNet, Tudui
from helpers.results import results_dir
from helpers.standin import CIFAR10_CLASSES, SyntheticCIFAR10, make_synthetic_cifar10

CHANCE = 0.1
# Each run: the model, how it is trained, and the range its test accuracy should land in.
RUNS = {
    "cifarnet_tutorial": {
        "what": "the PyTorch tutorial's CifarNet recipe (about 55% on CIFAR-10)",
        "model": "CifarNet",
        "batch_size": 4,
        "lr": 0.001,
        "momentum": 0.9,
        "epochs": 2,
        "normalize": True,
        "target": [0.45, 0.65],
        "seeds": 3,  # cheap enough to show how much a run varies with the seed
    },
    "tudui_tutorial": {
        "what": "the tutorial's Tudui recipe",
        "model": "Tudui",
        "batch_size": 64,
        "lr": 0.01,
        "momentum": 0.0,
        "epochs": 10,
        "normalize": False,
        "target": [0.45, 0.70],
    },
    "cifarnet_better_recipe": {
        "what": "a better recipe for the same CifarNet: batch 64, lr 0.01, momentum 0.9, 10 epochs",
        "model": "CifarNet",
        "batch_size": 64,
        "lr": 0.01,
        "momentum": 0.9,
        "epochs": 10,
        "normalize": True,
        "target": "at least 10 points above cifarnet_tutorial",
    },
    "wide_convnet": {
        "what": "a bigger model: three 3x3 conv blocks (32, 64, 128 channels) with batch norm",
        "model": "WideConvNet",
        "batch_size": 64,
        "lr": 0.02,
        "momentum": 0.9,
        "epochs": 8,
        "normalize": True,
        "target": "at least 10 points above cifarnet_tutorial",
    },
}
# The notebooks' recipes with their budgets: (train images, test images, epochs) on a CPU and in
# quick mode, as their training_budget calls set them.
NOTEBOOKS = {
    "01 Tudui": {
        "model": "Tudui", "batch_size": 64, "lr": 0.01, "momentum": 0.0, "normalize": False,
        "cpu": [20_000, 5_000, 5], "quick": [8_000, 1_000, 2],
    },
    "02 Tudui (3 epochs, then one more)": {
        "model": "Tudui", "batch_size": 64, "lr": 0.01, "momentum": 0.0, "normalize": False,
        "cpu": [20_000, 5_000, 4], "quick": [8_000, 1_000, 3],
    },
    "02 CifarNet (tutorial recipe)": {
        "model": "CifarNet", "batch_size": 4, "lr": 0.001, "momentum": 0.9, "normalize": True,
        "cpu": [20_000, 5_000, 2], "quick": [3_000, 1_000, 1],
    },
    "03 CifarNet": {
        "model": "CifarNet", "batch_size": 64, "lr": 0.01, "momentum": 0.9, "normalize": True,
        "cpu": [10_000, 2_000, 2], "quick": [3_000, 1_000, 1],
    },
    "04 MLP on pixels (Adam)": {
        "model": "MLP", "batch_size": 64, "lr": 0.001, "optimizer": "Adam", "normalize": False,
        "cpu": [10_000, 2_000, 6], "quick": [2_000, 500, 2],
    },
    "05 CifarNet, DDP on 2 processes (global batch 64)": {
        "model": "CifarNet", "batch_size": 64, "lr": 0.05, "momentum": 0.9, "normalize": True,
        "cpu": [10_000, 2_000, 3], "quick": [2_000, 500, 2],
    },
    "06 and bench Tudui, batch 64": {
        "model": "Tudui", "batch_size": 64, "lr": 0.01, "momentum": 0.0, "normalize": False,
        "cpu": [10_000, 5_000, 3], "quick": [1_024, 1_000, 2],
    },
    "06 and bench Tudui, batch 512, lr x8": {
        "model": "Tudui", "batch_size": 512, "lr": 0.08, "momentum": 0.0, "normalize": False,
        "cpu": [10_000, 5_000, 3], "quick": [1_024, 1_000, 2],
    },
}  # fmt: skip


def wide_convnet() -> nn.Module:
    """The calibration's bigger model: 3x3 convolutions with batch norm, 0.1 M parameters."""

    def block(cin: int, cout: int) -> list[nn.Module]:
        return [
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.MaxPool2d(2),
        ]

    return nn.Sequential(
        *block(3, 32), *block(32, 64), *block(64, 128), nn.Flatten(), nn.Linear(128 * 16, 10)
    )


def mlp() -> nn.Module:
    """Notebook 04's model: an MLP on the flattened pixels."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(3072, 64),
        nn.ReLU(),
        nn.Linear(64, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )


MODELS: dict[str, Callable[[], nn.Module]] = {
    "CifarNet": CifarNet,
    "Tudui": Tudui,
    "WideConvNet": wide_convnet,
    "MLP": mlp,
}


def as_tensors(n: int, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The stand-in's first ``n`` images as ToTensor makes them (float, [0, 1], channels first)."""
    images, labels = make_synthetic_cifar10(n, train=train)
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255), torch.tensor(labels)


def train_and_test(recipe: dict, data: dict, sizes: tuple[int, int, int], seed: int = 0) -> dict:
    """Train ``recipe`` on the first ``sizes[0]`` training images for ``sizes[2]`` epochs; test
    it."""
    n_train, n_test, epochs = sizes
    x_train = data["x_train"][:n_train]
    y_train = data["y_train"][:n_train]
    x_test = data["x_test"][:n_test]
    y_test = data["y_test"][:n_test]
    if recipe["normalize"]:  # Normalize((0.5,) * 3, (0.5,) * 3): [0, 1] to [-1, 1]
        x_train = (x_train - 0.5) / 0.5
        x_test = (x_test - 0.5) / 0.5
    torch.manual_seed(seed)
    model = MODELS[recipe["model"]]()
    if recipe.get("optimizer") == "Adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=recipe["lr"])
    else:
        optimizer = torch.optim.SGD(
            model.parameters(), lr=recipe["lr"], momentum=recipe["momentum"]
        )
    start = time.perf_counter()
    by_epoch = []
    for _ in range(epochs):
        model.train()
        for index in torch.randperm(len(x_train)).split(recipe["batch_size"]):
            loss = nn.functional.cross_entropy(model(x_train[index]), y_train[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            predicted = torch.cat([model(batch).argmax(1) for batch in x_test.split(1000)])
        by_epoch.append(round((predicted == y_test).float().mean().item(), 4))
    return {
        "train_size": len(x_train),
        "test_size": len(x_test),
        "epochs": epochs,
        "test_accuracy": by_epoch[-1],
        "test_accuracy_by_epoch": by_epoch,
        "seconds": round(time.perf_counter() - start, 1),
        "predicted": predicted,
    }


def colour_features(x: torch.Tensor) -> torch.Tensor:
    """What colour alone says: an 8-bin histogram of each channel, and each channel's mean and
    spread."""
    bins = (x * 8).long().clamp(0, 7).flatten(2)
    histogram = torch.zeros(len(x), 3, 8).scatter_add_(
        2, bins, torch.ones_like(bins, dtype=torch.float)
    )
    return torch.cat([histogram.flatten(1) / bins.shape[2], x.mean((2, 3)), x.std((2, 3))], 1)


def logistic_regression(features: Callable, data: dict, n_train: int, epochs: int = 10) -> dict:
    """A linear classifier (softmax regression, Adam, a little weight decay) on ``features`` of the
    images."""
    start = time.perf_counter()
    f_train = features(data["x_train"][:n_train])
    f_test = features(data["x_test"])
    mean = f_train.mean(0)
    std = f_train.std(0) + 1e-6
    f_train = (f_train - mean) / std
    f_test = (f_test - mean) / std
    y_train = data["y_train"][:n_train]
    torch.manual_seed(0)
    model = nn.Linear(f_train.shape[1], 10)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    for _ in range(epochs):
        for index in torch.randperm(len(f_train)).split(256):
            loss = nn.functional.cross_entropy(model(f_train[index]), y_train[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        test = (model(f_test).argmax(1) == data["y_test"]).float().mean().item()
        train = (model(f_train).argmax(1) == y_train).float().mean().item()
    return {
        "train_size": n_train,
        "test_size": len(f_test),
        "epochs": epochs,
        "test_accuracy": round(test, 4),
        "train_accuracy": round(train, 4),
        "seconds": round(time.perf_counter() - start, 1),
    }


def confusion(actual: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """Rows: the actual class; columns: the predicted one."""
    matrix = torch.zeros(10, 10, dtype=torch.long)
    matrix.index_put_((actual, predicted), torch.ones_like(actual), accumulate=True)
    return matrix


def confused_pairs(matrix: torch.Tensor) -> list[dict]:
    """Every pair of classes with its mistakes both ways, most confused first."""
    pairs = [
        {
            "pair": [CIFAR10_CLASSES[i], CIFAR10_CLASSES[j]],
            "mistakes": int(matrix[i, j] + matrix[j, i]),
        }
        for i in range(10)
        for j in range(i + 1, 10)
    ]
    return sorted(pairs, key=lambda p: -p["mistakes"])


def generation_seconds(repeats: int, threads: int) -> list[float]:
    """Seconds to generate the full stand-in (50,000 training and 10,000 test images) on
    ``threads``."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    times = []
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            make_synthetic_cifar10(50_000, train=True)
            make_synthetic_cifar10(10_000, train=False)
            times.append(round(time.perf_counter() - start, 2))
    finally:
        torch.set_num_threads(before)
    return times


def measure_generation(repeats: int) -> dict:
    """Generation times on all of torch's threads and on one, with the machine's load around
    them."""
    generation = {"load_average_before": [round(v, 2) for v in os.getloadavg()]}
    for threads in sorted({torch.get_num_threads(), 1}, reverse=True):
        print(f"Generating 60,000 images on {threads} thread(s)...", flush=True)
        times = generation_seconds(repeats, threads)
        generation[f"{threads}_threads"] = {"runs": times, "best": min(times)}
        print(f"  {times} s", flush=True)
    generation["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    return generation


def update_generation(out: Path) -> int:
    """Measure the generation time again, alone, into an existing full calibration (a busy
    machine spoils a timing more than it changes an accuracy)."""
    path = out / "data-calibration.json"
    result = json.loads(path.read_text(encoding="utf-8"))
    if result["data"]["fingerprint"] != fingerprint():
        print(f"{path} was measured on another version of the stand-in: run the full calibration.")
        return 1
    result["data"]["generation_seconds_60000_images"] = measure_generation(3)
    result["data"]["generation_measured"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    result["targets"] = _targets(result)
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"Updated the generation time in {path}: {json.dumps(result['targets']['generation'])}")
    return 0 if all(t["met"] for t in result["targets"].values()) else 1


def fingerprint() -> dict:
    """What the stand-in looks like now, to tell later whether this calibration is still its own:
    the first training labels and the mean pixel of the first 1,000 training images, per channel."""
    images, labels = make_synthetic_cifar10(1_000, train=True)
    return {
        "first_labels": labels[:20],
        "mean_pixel": [round(float(m), 3) for m in images.mean((0, 1, 2))],
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run on 5,000 images (not a calibration)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads for the training runs (default: torch's own choice)",
    )
    parser.add_argument(
        "--skip-notebooks", action="store_true", help="leave the notebooks' recipes out"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the result (default results/)"
    )
    parser.add_argument(
        "--generation-only",
        action="store_true",
        help="time the generation again (on a quiet machine) and update data-calibration.json",
    )
    return parser.parse_args(argv)


def recipe_runs(data: dict, sizes: tuple[int, int], quick: bool) -> tuple[dict, torch.Tensor]:
    """Every recipe of ``RUNS`` trained and tested: its result, and the confusion matrix of the
    tutorial's CifarNet."""
    n_train, n_test = sizes
    runs = {}
    matrix = None
    for name, recipe in RUNS.items():
        epochs = 1 if quick else recipe["epochs"]
        print(f"{name}: {recipe['what']}; {epochs} epoch(s) on {n_train:,} images...", flush=True)
        run = train_and_test(recipe, data, (n_train, n_test, epochs))
        predicted = run.pop("predicted")
        matrix_of_run = confusion(data["y_test"], predicted)
        run["per_class_accuracy"] = _per_class(matrix_of_run)
        if recipe.get("seeds", 1) > 1:  # the same recipe from other initial weights and orders
            others = [
                train_and_test(recipe, data, (n_train, n_test, epochs), seed=seed)
                for seed in range(1, recipe["seeds"])
            ]
            run["test_accuracy_by_seed"] = [run["test_accuracy"]]
            run["test_accuracy_by_seed"] += [other["test_accuracy"] for other in others]
        kept = {k: v for k, v in recipe.items() if k not in ("epochs", "seeds")}
        runs[name] = {**kept, **run}
        print(f"  test accuracy {run['test_accuracy']:.1%} ({run['seconds']:.0f} s)", flush=True)
        if "test_accuracy_by_seed" in run:
            print(f"  with seeds 0, 1, 2...: {run['test_accuracy_by_seed']}", flush=True)
        if name == "cifarnet_tutorial":
            matrix = matrix_of_run
    linear = (
        ("linear_on_pixels", lambda x: x.flatten(1), "logistic regression on the raw pixels"),
        (
            "linear_on_colour",
            colour_features,
            "logistic regression on colour histograms, means and spreads",
        ),
    )
    for name, features, what in linear:
        print(f"{name}: {what}...", flush=True)
        runs[name] = {"what": what, **logistic_regression(features, data, n_train)}
        print(f"  test accuracy {runs[name]['test_accuracy']:.1%}", flush=True)
    return runs, matrix


def notebook_runs(data: dict, sizes: tuple[int, int]) -> dict:
    """Every notebook's recipe on its CPU and quick budgets."""
    notebooks = {}
    for name, recipe in NOTEBOOKS.items():
        notebooks[name] = {k: v for k, v in recipe.items() if k not in ("cpu", "quick")}
        for budget in ("cpu", "quick"):
            train_size, test_size, epochs = recipe[budget]
            train_size = min(train_size, sizes[0])
            test_size = min(test_size, sizes[1])
            run = train_and_test(recipe, data, (train_size, test_size, epochs))
            run.pop("predicted")
            notebooks[name][budget] = run
            accuracy = run["test_accuracy"]
            print(f"{name}, {budget} budget: {accuracy:.1%} ({run['seconds']:.0f} s)", flush=True)
    return notebooks


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.generation_only:
        return update_generation(args.out if args.out is not None else results_dir())
    began = time.perf_counter()
    n_train, n_test = (5_000, 1_000) if args.quick else (50_000, 10_000)
    result = {
        "schema": 1,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["calibrate_data.py", *(sys.argv[1:] if argv is None else argv)]),
        "quick": args.quick,
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cpu_name": _cpu_name(),
            "cpu_cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "load_average_before": [round(v, 2) for v in os.getloadavg()],
        },
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
        "data": {
            "generator": "helpers.standin.make_synthetic_cifar10",
            "train_size": n_train,
            "test_size": n_test,
            "look_alike_pairs": [list(pair) for pair in SyntheticCIFAR10.pairs],
            "fingerprint": fingerprint(),
        },
    }
    result["data"]["generation_seconds_60000_images"] = measure_generation(1 if args.quick else 3)
    if args.threads:  # for the training runs
        torch.set_num_threads(args.threads)
    result["machine"]["torch_threads_training"] = torch.get_num_threads()

    x_train, y_train = as_tensors(n_train, True)
    x_test, y_test = as_tensors(n_test, False)
    data = {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    result["runs"], matrix = recipe_runs(data, (n_train, n_test), args.quick)

    pairs = confused_pairs(matrix)
    designed = {tuple(sorted(pair)) for pair in SyntheticCIFAR10.pairs}
    on_top = [tuple(sorted(p["pair"])) in designed for p in pairs[: len(designed)]]
    result["confusion"] = {
        "run": "cifarnet_tutorial",
        "classes": list(CIFAR10_CLASSES),
        "matrix": matrix.tolist(),
        "per_class_accuracy": _per_class(matrix),
        "most_confused_pairs": pairs[:6],
        "largest_cell": _largest_cell(matrix),
        "look_alike_pairs_in_top_4": sum(on_top),
    }
    print(f"Most confused pairs: {pairs[:6]}", flush=True)

    if not args.skip_notebooks:
        result["notebooks"] = notebook_runs(data, (n_train, n_test))

    if not args.quick:
        result["targets"] = _targets(result)
        print(json.dumps(result["targets"], indent=1), flush=True)
    result["machine"]["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    result["seconds"] = round(time.perf_counter() - began)
    out = args.out if args.out is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("data-calibration-quick.json" if args.quick else "data-calibration.json")
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"Wrote {path} ({result['seconds']} s in all)")
    return 0 if args.quick or all(t["met"] for t in result["targets"].values()) else 1


def _per_class(matrix: torch.Tensor) -> dict[str, float]:
    accuracy = matrix.diagonal() / matrix.sum(1).clamp(min=1)
    return {
        name: round(value, 3)
        for name, value in zip(CIFAR10_CLASSES, accuracy.tolist(), strict=True)
    }


def _largest_cell(matrix: torch.Tensor) -> dict:
    off = matrix.clone().fill_diagonal_(-1)
    i, j = divmod(int(off.argmax()), 10)
    return {
        "actual": CIFAR10_CLASSES[i],
        "predicted": CIFAR10_CLASSES[j],
        "count": int(matrix[i, j]),
    }


def _targets(result: dict) -> dict:
    """The calibration's targets, each with the measured figure and whether it is met."""
    runs = result["runs"]
    tutorial = runs["cifarnet_tutorial"]["test_accuracy"]
    targets = {}
    for name in ("cifarnet_tutorial", "tudui_tutorial"):
        low, high = runs[name]["target"]
        accuracy = runs[name]["test_accuracy"]
        targets[name] = {
            "target": f"{low:.0%}-{high:.0%}",
            "measured": accuracy,
            "met": low <= accuracy <= high,
        }
    for name in ("cifarnet_better_recipe", "wide_convnet"):
        gain = round((runs[name]["test_accuracy"] - tutorial) * 100, 1)
        targets[name] = {
            "target": "+10 points or more over cifarnet_tutorial",
            "measured": gain,
            "met": gain >= 10,
        }
    linear = runs["linear_on_pixels"]["test_accuracy"]
    targets["linear_on_pixels"] = {
        "target": "35% or less, and 20 points or more below cifarnet_tutorial",
        "measured": linear,
        "met": linear <= 0.35 and tutorial - linear >= 0.20,
    }
    colour = runs["linear_on_colour"]["test_accuracy"]
    targets["linear_on_colour"] = {
        "target": "30% or less",
        "measured": colour,
        "met": colour <= 0.30,
    }
    largest = result["confusion"]["largest_cell"]
    designed = {tuple(sorted(pair)) for pair in result["data"]["look_alike_pairs"]}
    targets["confusion"] = {
        "target": (
            "the 4 most confused pairs are the look-alike pairs, the largest cell one of them"
        ),
        "measured": [p["pair"] for p in result["confusion"]["most_confused_pairs"][:4]],
        "met": result["confusion"]["look_alike_pairs_in_top_4"] == 4
        and tuple(sorted([largest["actual"], largest["predicted"]])) in designed,
    }
    generation = result["data"]["generation_seconds_60000_images"]
    best = min(times["best"] for key, times in generation.items() if key.endswith("_threads"))
    targets["generation"] = {
        "target": "60,000 images in 10 s or less",
        "measured": best,
        "met": best <= 10,
    }
    return targets


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
