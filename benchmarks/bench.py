"""Benchmark: how fast Tudui trains with the tutorial's loop and the fast path of 06_performance.

Run ``make bench`` (or ``python benchmarks/bench.py``) on whatever device is present; ``--quick``
makes a short run. On the same data and from the same initial weights it trains, N times each,
alternating:

- the tutorial's loop (the baseline): a ``DataLoader`` over PIL images, batch 64, SGD at lr 0.01,
  float32;
- the fast path: the data on the device, a larger batch with its learning-rate recipe
  (``benchlib.LargeBatchSchedule``), ``channels_last``, mixed precision where the device has it,
  a fused optimizer, and on CUDA the whole step compiled with CUDA graphs;
- the control: the fast path without warm-up or decay.

For every run it records images/s, the test accuracy after each epoch and the ratio to the
baseline of the same run; the time the fast path takes to reach the baseline's accuracy; then a
ladder from the baseline to the fast path, one change a step. A run that diverged is a FAILURE
and the exit status is 1 (the control and nothing else excepted). The JSON is rewritten after each
part, so a stopped bench keeps what it finished; the plot is drawn at the end.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (  # noqa: E402
    ADAM_BASE_BATCH_SIZE,
    ADAM_BASE_LR,
    BASELINE_BATCH_SIZE,
    BASELINE_LR,
    PATH_NAMES,
    LargeBatchSchedule,
    LossStep,
    bench_failures,
    describe_result,
    device_name,
    make_optimizer,
    result_stem,
    scheduled,
    time_to_accuracy,
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

SEED = 0
GPU_FAST_BATCH = 2048  # with Adam: SGD's linear scaling rule diverged past SGD_BATCH_LIMIT
CPU_FAST_BATCH = 128  # a CPU step has no fixed cost for a larger batch to spread
SGD_BATCH_LIMIT = 512  # the fast path trains with SGD up to this batch, with Adam above it
LADDER_BATCH = 512  # the ladder's larger batch, as 06_performance's
FAST_EPOCHS = {"sgd": 30, "adam": 15}  # SGD's recipe needs more epochs than the baseline's 10
WARMUP_STEPS = 3  # per batch shape: compilation and CUDA graphs' recording happen here
PATHS = list(PATH_NAMES)  # the result files' keys: tutorial_loop (the baseline), fast_path, control
# Speed is judged on the first run, accuracy on every run.
TARGETS = {
    "cuda": {"images_per_second": 1_000_000, "ratio": 80.0, "seconds": 2.0},
    "cpu": {"ratio": 2.0},
}
BASELINE = {
    "loader": "dataloader",
    "batch_size": BASELINE_BATCH_SIZE,
    "recipe": "tutorial",
    "optimizer": "sgd",
    "channels_last": False,
    "precision": "float32",
    "fused": False,
    "compile": None,
}
PRECISION_WORDS = {
    "float32": "float32",
    "bf16": "bf16 autocast",
    "fp16": "fp16 autocast + GradScaler",
}


def settings_for(device: torch.device, args: argparse.Namespace) -> dict:
    """The run's settings from the command line and the device, checked."""
    on_cpu = device.type == "cpu"
    if args.quick:
        train_size = 2_048
        test_size = 1_000
        epochs = 2
        repeats = 2
    elif on_cpu:  # a tenth of the data, tested on 2,000 images: on 2 cores testing costs time too
        train_size = 10_000
        test_size = 2_000
        epochs = 10
        repeats = 3
    else:
        train_size = None
        test_size = None
        epochs = 10
        repeats = 3
    pick = lambda given, default: default if given is None else given  # noqa: E731
    fast_batch = pick(args.fast_batch, CPU_FAST_BATCH if on_cpu else GPU_FAST_BATCH)
    optimizer = (
        args.optimizer
        if args.optimizer != "auto"
        else ("sgd" if fast_batch <= SGD_BATCH_LIMIT else "adam")
    )
    settings = {
        "quick": args.quick,
        "epochs": pick(args.epochs, epochs),
        "fast_epochs": pick(args.fast_epochs, epochs if args.quick else FAST_EPOCHS[optimizer]),
        "repeats": pick(args.repeats, repeats),
        "ladder_epochs": pick(args.ladder_epochs, 2 if args.quick else 3),
        "train_size": pick(args.train_size, train_size),
        "test_size": pick(args.test_size, test_size),
    }
    if min(settings["epochs"], settings["fast_epochs"], settings["ladder_epochs"]) < 2:
        raise SystemExit(
            "bench: every --*epochs must be 2 or more: the first epoch is warm-up, timed apart"
        )
    if settings["repeats"] < 1 or fast_batch < 1:
        raise SystemExit("bench: --repeats and --fast-batch must be 1 or more")
    precision = choose_precision(device)
    used = "float32" if args.float32 or precision.dtype is None else precision.name.split()[0]
    compiled = device.type == "cuda" and not args.no_compile
    fast = {
        "loader": "device",
        "batch_size": fast_batch,
        "recipe": "schedule",
        "optimizer": optimizer,
        "channels_last": not args.no_channels_last,
        "precision": used,
        "fused": True,
        "compile": "reduce-overhead" if compiled else None,
        **({"compile_scope": "step"} if compiled else {}),
    }
    recipe = {"warmup_epochs": 1.0, "decay": "cosine", "max_lr": args.max_lr}
    return settings | {
        "recipe": {
            "base_batch_size": BASELINE_BATCH_SIZE,
            "base_lr": BASELINE_LR,
            "scaling": "linear",
            **recipe,
        },
        "adam_recipe": {
            "base_batch_size": ADAM_BASE_BATCH_SIZE,
            "base_lr": ADAM_BASE_LR,
            "scaling": "sqrt",
            **recipe,
        },
        "precision": {"name": precision.name, "why": precision.why, "used": used},
        "fast_config": fast,
        "dataloader_workers": min(8, max(1, (os.cpu_count() or 2) // 2)),
        "threads": torch.get_num_threads(),
        "skip": sorted(args.skip or []),
        "timed": (
            "training only; images/s: the median epoch from epoch 2 on; warm-up steps timed apart"
        ),
    }


def recipe_for(config: dict, settings: dict) -> dict:
    """The learning-rate recipe of a config's optimizer: SGD's (linear rule) or Adam's (square
    root)."""
    return settings["adam_recipe"] if config["optimizer"] == "adam" else settings["recipe"]


def schedule_for(config: dict, settings: dict, steps: int, epochs: int) -> LargeBatchSchedule:
    """The config's schedule; the control (``linear_scaling_only``) keeps the peak throughout."""
    recipe = recipe_for(config, settings)
    shape = (
        {"warmup_epochs": 0, "decay": "none"} if config["recipe"] == "linear_scaling_only" else {}
    )
    return LargeBatchSchedule(
        config["batch_size"],
        steps,
        epochs,
        base_batch_size=recipe["base_batch_size"],
        base_lr=recipe["base_lr"],
        scaling=recipe["scaling"],
        max_lr=recipe["max_lr"],
        warmup_epochs=shape.get("warmup_epochs", recipe["warmup_epochs"]),
        decay=shape.get("decay", recipe["decay"]),
    )


def describe_config(config: dict, settings: dict) -> str:
    """A config in words, as the report and the JSON's ``settings.paths`` show it."""
    loader = {
        "dataloader": "DataLoader over PIL images, ToTensor per sample, num_workers=0",
        "workers": (
            f"DataLoader with {settings['dataloader_workers']} workers, pinned memory on CUDA"
        ),
        "device": "the dataset on the device (DeviceLoader)",
    }[config["loader"]]
    recipe = recipe_for(config, settings)
    peak = f"lr {schedule_for(config, settings, 1, 1).peak_lr:g} ({recipe['scaling']} scaling)"
    lr = {
        "tutorial": f"lr {BASELINE_LR:g} constant",
        "schedule": (
            f"{peak} after a {recipe['warmup_epochs']:g}-epoch warm-up, "
            f"{recipe['decay']} decay to 0"
        ),
        "linear_scaling_only": f"{peak} from the first step, constant",
    }[config["recipe"]]
    name = "Adam" if config["optimizer"] == "adam" else "SGD"
    parts = [
        loader,
        f"batch {config['batch_size']}",
        lr,
        "channels_last" if config["channels_last"] else "contiguous",
    ]
    parts += [PRECISION_WORDS[config["precision"]], f"fused {name}" if config["fused"] else name]
    whole = " (the whole step)" if config.get("compile_scope") == "step" else ""
    parts.append(
        f"torch.compile mode={config['compile']}{whole}" if config["compile"] else "not compiled"
    )
    return ", ".join(parts)


class Pipeline:
    """A model, its loader, optimizer, schedule and scaler, built from a config."""

    def __init__(
        self,
        config: dict,
        data: dict,
        device: torch.device,
        *,
        epochs: int,
        seed: int,
        settings: dict,
    ):
        self.config = config
        self.device = device
        torch.manual_seed(seed)  # the same initial weights for every pipeline of a repeat
        self.model = Tudui().to(device)
        if config["channels_last"]:
            self.model = self.model.to(memory_format=torch.channels_last)
        batch = config["batch_size"]
        self.non_blocking = config["loader"] == "workers"
        if config["loader"] == "device":
            tensors = data["train_cl" if config["channels_last"] else "train"]
            generator = torch.Generator(device).manual_seed(seed)
            self.loader = DeviceLoader(
                *tensors, batch_size=batch, shuffle=True, generator=generator
            )
        else:
            workers = settings["dataloader_workers"] if self.non_blocking else 0
            extra = (
                {"pin_memory": device.type == "cuda", "persistent_workers": True} if workers else {}
            )
            generator = torch.Generator().manual_seed(seed)
            self.loader = DataLoader(
                data["dataset"],
                batch_size=batch,
                shuffle=True,
                generator=generator,
                num_workers=workers,
                **extra,
            )
        if config["recipe"] == "tutorial":
            self.schedule = None
            lr = BASELINE_LR
        else:
            self.schedule = schedule_for(config, settings, len(self.loader), epochs)
            lr = self.schedule.lr_at(0)
        self.optimizer = make_optimizer(
            config["optimizer"], self.model.parameters(), lr, fused=config["fused"]
        )
        self.net = self.model
        self.scaler = None
        if config["precision"] != "float32":
            self.net = Autocast(
                self.model, torch.bfloat16 if config["precision"] == "bf16" else torch.float16
            )
            self.scaler = grad_scaler(device) if config["precision"] == "fp16" else None
        self.step = LossStep(self.net) if config.get("compile_scope") == "step" else None
        if config["compile"]:
            torch.compiler.reset()  # each run compiles afresh
            mode = None if config["compile"] == "default" else config["compile"]
            if self.step is not None:
                self.step = torch.compile(self.step, mode=mode, dynamic=False)
            else:
                self.net = torch.compile(self.net, mode=mode, dynamic=False)
        self.lr_text = self.schedule.describe() if self.schedule else f"lr {BASELINE_LR:g} constant"

    def warm_up(self, data: dict) -> float:
        """Seconds of a few steps per batch shape at lr 0, weights restored after (it compiles
        here)."""
        x, y = data["train_cl" if self.config["channels_last"] else "train"]
        n = x.shape[0]
        batch = self.config["batch_size"]
        sizes = sorted({min(batch, n), n % batch} - {0}, reverse=True)
        batches = [(x[:size], y[:size]) for size in sizes for _ in range(WARMUP_STEPS)]
        saved = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        rates = [group["lr"] for group in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] = 0.0
        scaler = grad_scaler(self.device) if self.scaler is not None else None
        with Stopwatch(self.device) as watch:
            fast_path_epoch(
                self.net, batches, self.optimizer, self.device, scaler=scaler, loss_step=self.step
            )
        self.model.load_state_dict(saved)
        for group, rate in zip(self.optimizer.param_groups, rates, strict=True):
            group["lr"] = rate
        self.optimizer.state.clear()
        return watch.seconds


def train_run(pipe: Pipeline, data: dict, epochs: int, label: str, *, test: bool) -> dict:
    """Train ``pipe`` for ``epochs``, timing each epoch, testing after each one when ``test``."""
    device = pipe.device
    print(f"  {label}:", flush=True)
    record = {
        "lr": pipe.lr_text,
        "optimizer": "fused" if pipe.config["fused"] else "default",
        "epoch_seconds": [],
        "epoch_images": [],
        "epoch_train_loss": [],
        "epoch_test_accuracy": [] if test else None,
        "status": "ok",
        "error": None,
    }
    try:
        record["warmup_seconds"] = pipe.warm_up(data)
        for epoch in range(epochs):
            with Stopwatch(device) as watch:
                first = epoch * len(pipe.loader)
                batches = scheduled(
                    pipe.loader,
                    pipe.optimizer,
                    pipe.schedule,
                    first,
                    device,
                    non_blocking=pipe.non_blocking,
                )
                stats = fast_path_epoch(
                    pipe.net,
                    batches,
                    pipe.optimizer,
                    device,
                    scaler=pipe.scaler,
                    loss_step=pipe.step,
                )
            record["epoch_seconds"].append(watch.seconds)
            record["epoch_images"].append(stats.samples)
            record["epoch_train_loss"].append(stats.loss)
            rate = stats.samples / watch.seconds
            line = f"    epoch {epoch + 1}: {rate:10,.0f} images/s, loss {stats.loss:.3f}"
            if test:
                _, accuracy = evaluate(
                    pipe.model, data["test"], nn.CrossEntropyLoss(), device, progress=False
                )
                record["epoch_test_accuracy"].append(accuracy)
                line += f", test accuracy {accuracy:.1%}"
            print(line, flush=True)
    except FloatingPointError as error:
        record["status"] = "non-finite"
        record["error"] = f"epoch {len(record['epoch_seconds']) + 1}: {error}"
        print(f"    NON-FINITE: {record['error']}", flush=True)
    finally:
        pipe.loader = None  # persistent DataLoader workers end with it
    seconds = record["epoch_seconds"]
    images = record["epoch_images"]
    rates = [n / t for n, t in zip(images[1:], seconds[1:], strict=True)]
    record["first_epoch_seconds"] = seconds[0] if seconds else None
    record["images_per_second"] = statistics.median(rates) if rates else None
    record["images_per_second_mean"] = sum(images[1:]) / sum(seconds[1:]) if rates else None
    ok = test and record["status"] == "ok" and record["epoch_test_accuracy"]
    record["test_accuracy"] = record["epoch_test_accuracy"][-1] if ok else None
    return record


def path_configs(settings: dict) -> dict:
    """The baseline, the fast path and the control, by their keys in the result."""
    fast = settings["fast_config"]
    return {
        "tutorial_loop": BASELINE,
        "fast_path": fast,
        "linear_scaling_only": {**fast, "recipe": "linear_scaling_only"},
    }


def run_paths(data: dict, settings: dict, device: torch.device, save) -> list[dict]:
    """Every repeat of the three pipelines, each in turn first; ``save(runs)`` after each repeat."""
    configs = path_configs(settings)
    runs = []
    for repeat in range(settings["repeats"]):
        run = {}
        for path in PATHS[repeat % 3 :] + PATHS[: repeat % 3]:
            epochs = settings["epochs"] if path == "tutorial_loop" else settings["fast_epochs"]
            seed = SEED + repeat
            pipe = Pipeline(
                configs[path], data, device, epochs=epochs, seed=seed, settings=settings
            )
            run[path] = train_run(
                pipe, data, epochs, f"run {repeat + 1}, {PATH_NAMES[path]}", test=True
            )
        baseline = run["tutorial_loop"]
        fast = run["fast_path"]
        ratio = (
            fast["images_per_second"] / baseline["images_per_second"]
            if fast["images_per_second"] and baseline["images_per_second"]
            else None
        )
        target = baseline["test_accuracy"]
        seconds, epoch = (
            time_to_accuracy(fast["epoch_seconds"], fast["epoch_test_accuracy"], target)
            if target
            else (None, None)
        )
        print(
            f"  run {repeat + 1}: fast path / tutorial's loop = {_fmt(ratio, '.2f')}x", flush=True
        )
        runs.append(
            {path: run[path] for path in PATHS}
            | {
                "ratio": ratio,
                "time_to_accuracy": {"target": target, "seconds": seconds, "epoch": epoch},
            }
        )
        save(runs)
    return runs


def ladder_steps(device: torch.device, settings: dict) -> list[dict]:
    """The ladder: each step the one above plus one change, or skipped with the reason."""
    fast = settings["fast_config"]
    steps = []

    def add(key: str, words: str, config: dict | None, skipped: str | None = None) -> dict:
        steps.append({"key": key, "step": words, "config": config, "skipped": skipped})
        return config

    config = add("tutorial", "tutorial's loop (DataLoader, PIL, batch 64)", dict(BASELINE))
    config = add(
        "workers",
        f"+ {settings['dataloader_workers']} DataLoader worker(s)",
        {**config, "loader": "workers"},
    )
    config = add("device", "+ data held on the device", {**config, "loader": "device"})
    config = add(
        "large_batch",
        f"+ batch {LADDER_BATCH} with the recipe",
        {**config, "batch_size": LADDER_BATCH, "recipe": "schedule"},
    )
    if fast["channels_last"]:
        config = add("channels_last", "+ channels_last", {**config, "channels_last": True})
    if fast["precision"] != "float32":
        config = add(
            "mixed_precision",
            f"+ {PRECISION_WORDS[fast['precision']]}",
            {**config, "precision": fast["precision"]},
        )
    else:
        add("mixed_precision", "+ mixed precision", None, settings["precision"]["why"])
    config = add("fused", "+ fused SGD", {**config, "fused": True})
    if fast["compile"]:
        config = add("compile", "+ torch.compile (default mode)", {**config, "compile": "default"})
        config = add(
            "cuda_graphs",
            "+ CUDA graphs (mode='reduce-overhead')",
            {**config, "compile": "reduce-overhead"},
        )
    else:
        why = "CUDA only here" if device.type != "cuda" else "left out (--no-compile)"
        add("compile", "+ torch.compile", None, why)
        add("cuda_graphs", "+ CUDA graphs", None, why)
    if config != fast:
        name = "Adam" if fast["optimizer"] == "adam" else "SGD"
        whole = ", the whole step compiled" if fast.get("compile_scope") else ""
        add("fast_batch", f"+ batch {fast['batch_size']} with {name}'s recipe{whole}", dict(fast))
    for step in steps:
        step["fast_path"] = step["config"] == fast
    return steps


def run_ladder(data: dict, settings: dict, device: torch.device) -> list[dict]:
    """Train and time each step of the ladder for ``ladder_epochs``; its speed-ups over the one
    before."""
    rungs = []
    base = None
    previous = None
    for step in ladder_steps(device, settings):
        rung = dict(step)
        if not step["skipped"]:
            rung["description"] = describe_config(step["config"], settings)
            epochs = settings["ladder_epochs"]
            pipe = Pipeline(
                step["config"], data, device, epochs=epochs, seed=SEED, settings=settings
            )
            rung |= train_run(
                pipe, data, settings["ladder_epochs"], f"ladder: {step['step']}", test=False
            )
            ips = rung["images_per_second"]
            base = base or ips
            rung["speedup_previous"] = ips / previous if ips and previous else None
            rung["speedup_tutorial"] = ips / base if ips and base else None
            previous = ips or previous
        rungs.append(rung)
    return rungs


def spread(values: list[float | None]) -> dict:
    """The first run's value, and the median, least and most over the runs."""
    known = [v for v in values if v is not None]
    middle, low, high = (
        (statistics.median(known), min(known), max(known)) if known else (None, None, None)
    )
    return {
        "first_run": values[0] if values else None,
        "median": middle,
        "min": low,
        "max": high,
        "runs": values,
    }


def summarize(runs: list[dict]) -> dict:
    """The figures of every run side by side."""
    steady = {p: [s for r in runs for s in r[p]["epoch_seconds"][1:]] for p in PATHS}
    return {
        "images_per_second": {p: spread([r[p]["images_per_second"] for r in runs]) for p in PATHS},
        "ratio": spread([r["ratio"] for r in runs]),
        "test_accuracy": {p: {"runs": [r[p]["test_accuracy"] for r in runs]} for p in PATHS},
        "time_to_accuracy_seconds": spread([r["time_to_accuracy"]["seconds"] for r in runs]),
        "warmup_seconds": {p: [r[p].get("warmup_seconds") for r in runs] for p in PATHS},
        "first_epoch_seconds": {
            p: {
                "runs": [r[p]["first_epoch_seconds"] for r in runs],
                "steady_median": statistics.median(steady[p]) if steady[p] else None,
            }
            for p in PATHS
        },
    }


def judge_targets(device: torch.device, runs: list[dict], failures: list[dict]) -> dict:
    """The device's targets, met or not: speed on the first run, accuracy on every run."""
    goals = TARGETS.get(device.type, {})
    checks = {"judged_on": "speed: the first run; accuracy: every run"}
    if not runs:
        return checks
    first = runs[0]

    def judge(name: str, value: float | None, text: str, *, at_most: bool = False) -> None:
        goal = goals[name]
        met = value is not None and (value <= goal if at_most else value >= goal)
        checks[name] = {
            "target": goal,
            "measured": value,
            "met": met,
            "text": text.format(goal=goal),
        }

    if "images_per_second" in goals:
        value = first["fast_path"]["images_per_second"]
        judge(
            "images_per_second", value, f"fast path >= {{goal:,}} images/s ({_fmt(value, ',.0f')})"
        )
    value = first["ratio"]
    judge("ratio", value, f"fast path >= {{goal:g}}x the tutorial's loop ({_fmt(value, '.2f')}x)")
    if "seconds" in goals:
        value = first["time_to_accuracy"]["seconds"]
        judge(
            "seconds",
            value,
            f"time to the baseline's accuracy <= {{goal:g}} s ({_fmt(value, '.2f')} s)",
            at_most=True,
        )
    reached = [r["time_to_accuracy"]["seconds"] is not None for r in runs]
    failed = [f for f in failures if f.get("path") == "fast_path"]
    learned = all((r["tutorial_loop"]["test_accuracy"] or 0) >= 0.15 for r in runs)  # chance: 10%
    checks["accuracy"] = {
        "target": "every fast-path run reaches the baseline's final test accuracy, none fails",
        "measured": {"reached": reached, "failures": len(failed)},
        "met": False
        if failed
        else (all(reached) if learned else None),  # None: the baseline learned nothing
        "text": "every fast-path run reaches the baseline's accuracy "
        f"({sum(reached)} of {len(runs)}, "
        f"{len(failed)} failed)"
        + ("" if learned else "; not judged: the baseline ended near chance"),
    }
    return checks


def failing(failures: list[dict]) -> list[dict]:
    """The failures that fail the bench: all but the control's, which shows what the recipe
    prevents."""
    return [f for f in failures if f.get("path") != "linear_scaling_only"]


def _fmt(value: float | None, pattern: str) -> str:
    return "not measured" if value is None else format(value, pattern)


def plot(result: dict, png_path: Path) -> None:
    """Three panels: every run's images/s, the ladder, and test accuracy against training
    seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    colours = {
        "tutorial_loop": "tab:gray",
        "fast_path": "tab:green",
        "linear_scaling_only": "tab:orange",
    }
    runs = result["runs"]
    ax = axes[0]
    for i, path in enumerate(PATHS):
        shown = [r[path]["images_per_second"] for r in runs if r[path]["images_per_second"]]
        ax.scatter([i] * len(shown), shown, color=colours[path], s=40, zorder=3)
    ax.set_xticks(range(len(PATHS)), [PATH_NAMES[p] for p in PATHS], fontsize=10)
    ax.set_yscale("log")
    ax.set_ylabel("training images/s (a dot per run)")
    ratios = ", ".join(f"{r['ratio']:.2f}x" for r in runs if r["ratio"])
    ax.set_title(f"fast path / tutorial's loop: {ratios or 'none'}", fontsize=11)
    ax = axes[1]
    ladder = [r for r in result.get("ladder", []) if r.get("images_per_second")]
    if ladder:
        bars = ax.barh(
            range(len(ladder)),
            [r["images_per_second"] for r in ladder],
            color=["tab:green" if r.get("fast_path") else "tab:blue" for r in ladder],
        )
        speedups = [f"{r['speedup_tutorial']:.2f}x" for r in ladder]
        ax.bar_label(bars, speedups, fontsize=10, padding=3)
        ax.set_yticks(range(len(ladder)), [r["step"] for r in ladder], fontsize=10)
        ax.invert_yaxis()
    ax.set_xlabel("training images/s (x the tutorial's loop)")
    ax.set_title("the ladder: each step added to the ones above", fontsize=11)
    ax = axes[2]
    for path in PATHS:
        for number, run in enumerate(runs):
            accuracy = run[path]["epoch_test_accuracy"] or []
            elapsed = [sum(run[path]["epoch_seconds"][: i + 1]) for i in range(len(accuracy))]
            label = PATH_NAMES[path] if number == 0 else None
            ax.plot(
                elapsed, accuracy, "o-", color=colours[path], markersize=3, alpha=0.8, label=label
            )
    ax.set(
        xscale="log",
        xlabel="training seconds (testing left out)",
        ylabel="test accuracy after each epoch",
    )
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # labels at 1, 10, 100 s only
    ax.set_title("time to accuracy", fontsize=11)
    ax.legend(fontsize=10)
    device = result["device"]
    quick = " (quick run)" if result["settings"]["quick"] else ""
    torch_version = result["versions"]["torch"]
    day = result["date"][:10]
    fig.suptitle(f"{device['name']} ({device['type']}), torch {torch_version}, {day}{quick}")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="a short run: 2,048 images, 2 epochs, 2 runs")
    add("--repeats", type=int, help="runs of each pipeline (default 3, quick 2)")
    add("--epochs", type=int, help="the baseline's epochs, 2 or more (default 10, quick 2)")
    add(
        "--fast-epochs", type=int, help="the fast path's epochs (default 30 with SGD, 15 with Adam)"
    )
    add("--ladder-epochs", type=int, help="epochs per ladder step (default 3, quick 2)")
    add("--train-size", type=int, help="training images (default: CPU 10,000, GPU all)")
    add("--test-size", type=int, help="test images (default: CPU 2,000, GPU all)")
    add("--device", help="the device to measure (default: the best available)")
    add(
        "--fast-batch",
        type=int,
        help=f"the fast path's batch (default {GPU_FAST_BATCH}, CPU {CPU_FAST_BATCH})",
    )
    add(
        "--optimizer",
        choices=("auto", "sgd", "adam"),
        default="auto",
        help=f"auto: SGD up to batch {SGD_BATCH_LIMIT}",
    )
    add("--max-lr", type=float, help="cap the recipe's scaled learning rate")
    add(
        "--no-compile",
        action="store_true",
        help="leave torch.compile out (it is used on CUDA only)",
    )
    add("--no-channels-last", action="store_true", help="leave channels_last out")
    add("--float32", action="store_true", help="leave mixed precision out")
    add("--skip", action="append", choices=("ladder",), help="leave the ladder out")
    add("--out", type=Path, help="folder for the results (default results/)")
    return parser.parse_args(argv)


def load_data(settings: dict, device: torch.device) -> dict:
    """The training set as PIL-backed dataset and as device tensors, and the test loader."""
    to_tensor = transforms.ToTensor()
    train = load_cifar10(train=True, transform=to_tensor, size=settings["train_size"])
    test = load_cifar10(train=False, transform=to_tensor, size=settings["test_size"])
    settings["train_size"] = len(train)
    settings["test_size"] = len(test)
    synthetic = isinstance(train, SyntheticCIFAR10)
    settings["data"] = "synthetic stand-in" if synthetic else "CIFAR-10"
    if synthetic:
        settings["stand_in"] = STAND_IN_VERSION
    x, y = dataset_tensors(train, device)
    return {
        "dataset": train,
        "train": (x, y),
        "train_cl": (x.contiguous(memory_format=torch.channels_last), y),
        "test": DeviceLoader(*dataset_tensors(test, device), batch_size=1000),
    }


def run(argv: list[str] | None = None) -> dict:
    """The whole benchmark; returns the result, also written to ``--out``."""
    args = parse_args(argv)
    began = time.perf_counter()
    device = pick_device(args.device)
    settings = settings_for(device, args)
    out = args.out if args.out is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    data = load_data(settings, device)
    settings["paths"] = {
        p: {**c, "description": describe_config(c, settings)}
        for p, c in path_configs(settings).items()
    }
    name = device_name(device)
    print(
        f"Benchmark on {name} ({device}); "
        f"fast path: {settings['paths']['fast_path']['description']}",
        flush=True,
    )
    stem = result_stem(device.type, name, quick=args.quick)
    json_path = out / f"{stem}.json"
    png_path = out / f"{stem}.png"
    png_path.unlink(missing_ok=True)  # an earlier run's plot no longer matches the JSON
    command = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    state = {"ladder": [], "incomplete": "the runs are still going"}

    def save(runs: list[dict]) -> dict:
        result = {
            "schema": 2,
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
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
                "load_average": os.getloadavg(),
            },
            "settings": settings,
            "runs": runs,
            "ladder": state["ladder"],
            "summary": summarize(runs),
            "command": command,
        }
        if state["incomplete"]:
            result["incomplete"] = state["incomplete"]
        result["failures"] = bench_failures(result)
        result["targets"] = judge_targets(device, runs, result["failures"])
        result["exit_status"] = 1 if failing(result["failures"]) or state["incomplete"] else 0
        result["wall_seconds"] = time.perf_counter() - began
        partial = json_path.with_name(
            json_path.name + ".partial"
        )  # a kill mid-write leaves the last whole one
        partial.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, json_path)
        return result

    runs = run_paths(data, settings, device, save)
    if "ladder" not in settings["skip"]:
        state["incomplete"] = "written before the ladder ran"
        save(runs)
        print("The ladder, one step at a time:", flush=True)
        try:
            state["ladder"] = run_ladder(data, settings, device)
        except BaseException as error:  # Ctrl-C or an error: the file says what stopped it
            state["incomplete"] = f"the ladder stopped by {type(error).__name__}: {error}"
            save(runs)
            raise
    state["incomplete"] = None
    result = save(runs)
    plot(result, png_path)
    print()
    print(describe_result(result))
    print(f"wall time {result['wall_seconds']:.0f} s; wrote {json_path} and {png_path}")
    if failing(result["failures"]):
        print(
            f"FAILED: {len(failing(result['failures']))} run(s) diverged or became non-finite: "
            "exit status 1"
        )
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; the exit status is 1 when a run other than the control's failed."""
    return run(argv)["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
