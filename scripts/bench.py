"""Benchmark: how fast Tudui trains with the seeds' pipeline and with the fast path, and what each step buys.

Run ``make bench`` (or ``.venv/bin/python scripts/bench.py``) on whatever device is present; add
``--quick`` for a short run. It measures, on the same data and from the same initial weights:

- **runs**: each pipeline trained for its full number of epochs (the seed pipeline 10, the fast
  paths 30 with SGD, whose recipe needs more epochs than the seed to reach its accuracy, and 15
  with Adam; see the README), three times, alternating, with the test accuracy measured after
  every epoch (outside the training time):

  - the seed pipeline: a ``DataLoader`` over PIL images with ``ToTensor`` per sample, batch 64,
    SGD at lr 0.01, float32, as seed 000 trains (shuffled, which seed 000 forgets);
  - the fast path: the dataset held on the device (``helpers.fastpath.DeviceLoader``), on a GPU
    batch 2,048 with Adam (past ``SGD_BATCH_LIMIT``, where SGD's linear scaling rule diverged) and
    on a CPU batch 128 with SGD (where a larger batch only costs: see ``CPU_FAST_BATCH``), each
    with its large-batch recipe (``LargeBatchSchedule``: the rate scaled from a base batch,
    linearly for SGD and by the square root for Adam, a warm-up over the first epoch, a cosine
    decay), ``channels_last``, mixed precision where the device has it (``choose_precision``: bf16,
    else fp16 with a ``GradScaler`` on CUDA), the fused optimizer, and on CUDA ``torch.compile``
    (CUDA graphs, ``mode="reduce-overhead"``, at batch 1,024 or less; the default mode above);
  - no warm-up or decay: the fast path with the peak rate from the first step, constant (for SGD
    linear scaling only, what the first H100 bench ran, where one run of three diverged): the
    control for the recipe.

  For each run: images per second over epoch 2 on (the first is warm-up), the first epoch apart,
  the warm-up and compilation measured apart before the first epoch, the test accuracy after
  each epoch, and the **time to accuracy**: the training seconds until the fast path first
  reaches the seed pipeline's final test accuracy of the same run, checked after each epoch;
- **the ladder**: one step at a time from the seed pipeline to the fast path (DataLoader
  workers with pinned memory and non-blocking copies; the data on the device; batch 512 with the
  recipe, as 06_performance; channels_last; mixed precision; the fused optimizer; ``torch.compile``;
  CUDA graphs; then the fast path's batch and optimizer: on a CPU batch 128, on CUDA batch
  2,048 with Adam; on CUDA also batch 8,192), each
  trained for a few epochs and timed, so that the
  report shows what each step buys on this device; a step the device cannot take is listed as
  skipped, with the reason;
- a training loop timed with and without waiting for the device, and images per second of a
  training step for ``CifarNet`` and ``Tudui`` across batch sizes on the CPU and the accelerator.

A run whose loss or weights became NaN or infinite, or which diverged (see
``helpers.timing.run_failure``), is a FAILURE: named in the JSON and the printed report, and the
script exits with status 1, unless only the control's runs failed (they show what the recipe
prevents) or the ladder's steps past the fast path's batch (timed for throughput, beyond where
the recipe was measured). The targets of issue 12 are judged from this run's measurements and
reported met or not met.

Writes ``results/<name>.json`` and ``results/<name>.png``, the name made by
``helpers.timing.result_stem`` from the device (and ``-quick`` for a short run), so a CPU run never
overwrites a GPU result.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
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
from helpers.fastpath import (
    ADAM_BASE_BATCH_SIZE,
    ADAM_BASE_LR,
    SEED_BATCH_SIZE,
    SEED_LR,
    Autocast,
    DeviceLoader,
    LargeBatchSchedule,
    LossStep,
    adam,
    added_weights_max,
    choose_precision,
    cudnn_autotuner,
    dataset_tensors,
    grad_scaler,
    sgd,
    train_epoch,
    widen_first_conv,
)
from helpers.models import CifarNet, Tudui
from helpers.timing import (
    PATH_NAMES,
    Stopwatch,
    autorange,
    bench_failures,
    describe_result,
    result_stem,
    results_dir,
    synchronize,
    time_to_accuracy,
)
from helpers.train import evaluate

SEED = 0
FAST_BATCH = 2048  # on a GPU, with Adam (see SGD_BATCH_LIMIT); on a CPU CPU_FAST_BATCH
# On a CPU a step has no fixed cost to spread over a larger batch (06's section 2: the recorded CPU
# sweep fits none) and Tudui's time per image grows with the batch, so the fast path keeps a small
# one: in the 2-core CPU's ladders (results/bench-cpu-amd-epyc.json) the fast path's settings ran at
# 4,038 images/s at batch 512 and 4,485 at batch 128 (2026-11-22), 2,734 and 2,841 (2026-11-27).
CPU_FAST_BATCH = 128
LADDER_BATCH = 512  # the ladder's larger batch on every device, as 06_performance's step
# SGD's linear scaling rule holds for Tudui up to batch 512 and breaks by 2,048, where the recipe
# diverged; there Adam with square-root scaling (helpers.fastpath.ADAM_BASE_LR) reached the seed
# pipeline's 10-epoch accuracy after 6 epochs with each of 3 seeds (on the CPU:
# results/large-batch-adam-*.json; at 8,192 it did not). So by default the fast path trains with
# SGD's recipe up to this batch and with Adam's above it.
SGD_BATCH_LIMIT = 512
# Epochs of the fast paths' runs, by optimizer: SGD's recipe needed 15 at batch 512 to reach the seed's
# accuracy (README), so 3x the seed's 10; Adam's at batch 2,048 needed 6 of 15
FAST_EPOCHS = {"sgd": 30, "adam": 15}
OPTIMIZERS = ("auto", "sgd", "adam")
PATHS = list(PATH_NAMES)  # seed_pipeline, fast_path, linear_scaling_only
PARTS = {"ladder": "the ladder", "demo": "the timing demo", "sweep": "the batch-size sweep"}  # after the runs
WARMUP_STEPS = 3  # per batch shape: CUDA graphs warm up, then record, then replay
# The targets (issue 12). Speed is judged on the first run (its spread is printed beside it);
# accuracy on every run.
TARGETS = {
    "cuda": {
        "fast_images_per_second_at_least": 1_000_000,
        "ratio_at_least": 80.0,
        "every_fast_run_reaches_seed_accuracy": True,
        "time_to_accuracy_at_most_seconds": 2.0,
    },
    "cpu": {"ratio_at_least": 2.0, "every_fast_run_reaches_seed_accuracy": True},
}
COMPILE_MODES = ("auto", "none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def device_name(device: torch.device) -> str:
    """The device's name as the driver (CUDA) or the CPU's identification reports it."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        capabilities = getattr(torch.cpu, "get_capabilities", None)
        name = capabilities().get("cpu_name") if capabilities else None
        return str(name or platform.processor() or platform.machine())
    return str(device)


def fast_batch_for(device: torch.device) -> int:
    """The fast path's batch by default: ``FAST_BATCH`` (2,048), on a CPU ``CPU_FAST_BATCH`` (128)."""
    return CPU_FAST_BATCH if device.type == "cpu" else FAST_BATCH


def optimizer_for(batch_size: int, asked: str) -> str:
    """The fast path's optimizer: ``asked``, or for ``auto`` SGD up to ``SGD_BATCH_LIMIT``, Adam above."""
    if asked != "auto":
        return asked
    return "sgd" if batch_size <= SGD_BATCH_LIMIT else "adam"


def compile_mode_for(device: torch.device, batch_size: int, asked: str, scope: str = "model") -> str | None:
    """The ``torch.compile`` mode of the fast path: ``None`` for none.

    ``auto``: none off CUDA (on a CPU ``torch.compile`` needs a C++ compiler and minutes of
    compiling). On CUDA, with the whole step compiled (``scope="step"``, the fast path's default
    there): CUDA graphs (``reduce-overhead``) at every batch: on the H100 on 2026-11-23 that bench
    ran at 806,669 images/s in its first run against the model compiled in the default mode's
    516,622 (``results/bench-cuda-nvidia-h100-80gb-hbm3-2026-11-23*.json``). With the model alone
    compiled: CUDA graphs up to batch 1,024, plain ``default`` above. From the H100 probe of
    2026-11-22 (``../shared/gpu-runs``): at batch 512 CUDA graphs gave 410k images/s against 190k
    for ``default``; at batch 2,048, 655k against 814k.
    """
    if asked == "none":
        return None
    if asked != "auto":
        return asked
    if device.type != "cuda":
        return None
    if scope == "step":
        return "reduce-overhead"
    return "reduce-overhead" if batch_size <= 1024 else "default"


def compile_scope_for(device: torch.device, asked: str) -> str:
    """What the fast path compiles: ``asked``, or for ``auto`` the whole step on CUDA (the model, the
    loss and the count in one ``helpers.fastpath.LossStep``; measured above), the model elsewhere."""
    if asked != "auto":
        return asked
    return "step" if device.type == "cuda" else "model"


def dataloader_workers() -> int:
    """Worker processes for the ladder's DataLoader step: half the cores, 1 to 8."""
    return min(8, max(1, (os.cpu_count() or 2) // 2))


def settings_for(device: torch.device, args: argparse.Namespace) -> dict:
    on_cpu = device.type == "cpu"
    if args.quick:
        train_size, test_size, epochs, repeats = 2_048, 1_000, 2, 2
    else:
        # On a 2-core CPU: a tenth of the data's epochs, tested on 2,000 images (testing after each of
        # the 70 epochs of a repeat costs about a second per 5,000 images there)
        train_size, test_size = (10_000, 2_000) if on_cpu else (None, None)
        epochs, repeats = 10, 3
    train_size = args.train_size if args.train_size is not None else train_size
    test_size = args.test_size if args.test_size is not None else test_size
    epochs = args.epochs if args.epochs is not None else epochs
    repeats = args.repeats if args.repeats is not None else repeats
    fast_batch = args.fast_batch if args.fast_batch is not None else fast_batch_for(device)
    optimizer = optimizer_for(fast_batch, args.optimizer)
    fast_epochs = (
        args.fast_epochs
        if args.fast_epochs is not None
        else (FAST_EPOCHS[optimizer] if not args.quick else epochs)
    )
    ladder_epochs = args.ladder_epochs if args.ladder_epochs is not None else (2 if args.quick else 3)
    if min(epochs, fast_epochs, ladder_epochs) < 2:
        raise SystemExit(
            "--epochs, --fast-epochs and --ladder-epochs must be 2 or more: the first epoch is warm-up, "
            "throughput is timed after it"
        )
    if repeats < 1:
        raise SystemExit("--repeats must be 1 or more")
    if fast_batch < 1 or any(b < 1 for b in args.ladder_batches or []):
        raise SystemExit("--fast-batch and --ladder-batches take positive batch sizes")
    precision = choose_precision(device)
    scope = compile_scope_for(device, args.compile_scope)
    fast = {
        "loader": "device",
        "batch_size": fast_batch,
        "recipe": "schedule",
        "optimizer": optimizer,
        "channels_last": not args.no_channels_last,
        "precision": "float32" if args.float32 else _precision_key(precision),
        "fused": not args.no_fused,
        "compile": compile_mode_for(
            device, fast_batch, "none" if args.no_compile else args.compile_mode, scope
        ),
    }
    if scope == "step":  # only then: the key stays out of configs of before
        fast["compile_scope"] = "step"
    if args.input_channels != 3:  # likewise
        fast["input_channels"] = args.input_channels
    if args.cudnn_benchmark == "on":  # likewise
        if device.type != "cuda":
            raise SystemExit(
                f"--cudnn-benchmark on: the cuDNN autotuner tunes CUDA's convolutions, and this run is on "
                f"{device.type}; leave it out there, or run on a CUDA GPU (--device cuda)"
            )
        fast["cudnn_benchmark"] = True
    if args.ladder_batches is None:
        big = [2048, 8192] if device.type == "cuda" and not args.quick else []
        ladder_batches = [batch for batch in big if batch != fast_batch]
    else:
        ladder_batches = args.ladder_batches
    return {
        "quick": args.quick,
        "epochs": epochs,
        "fast_epochs": fast_epochs,
        "repeats": repeats,
        "ladder_epochs": ladder_epochs,
        "ladder_batches": ladder_batches,
        "train_size": train_size,  # None: all of it (filled in once the data is loaded)
        "test_size": test_size,
        "test_after_the_run": args.test_after_the_run,
        "timed": (
            (
                "training only (each epoch's weights are copied and tested after the run); "
                if args.test_after_the_run
                else "training only (testing after each epoch is left out); "
            )
            + "images/s: the median over epochs 2 and "
            "later of each epoch's images / seconds (the mean over them beside it), the first epoch being "
            f"warm-up; before each run, {WARMUP_STEPS} warm-up steps per batch shape on the same model at "
            "lr 0, its weights restored after, timed apart (compilation happens there)"
        ),
        "recipe": {
            "base_batch_size": SEED_BATCH_SIZE,
            "base_lr": args.fast_base_lr,
            "warmup_epochs": args.warmup_epochs,
            "decay": args.decay,
            "max_lr": args.max_lr,
            "scaling": "linear",
        },
        "adam_recipe": {
            "base_batch_size": ADAM_BASE_BATCH_SIZE,
            "base_lr": ADAM_BASE_LR,
            "warmup_epochs": args.warmup_epochs,
            "decay": args.decay,
            "max_lr": args.max_lr,
            "scaling": "sqrt",
        },
        "precision": {"name": precision.name, "why": precision.why, "used": fast["precision"]},
        "fast_config": fast,
        "dataloader_workers": dataloader_workers(),
        "optimizer": (
            "SGD without momentum (as seed 000)"
            if optimizer == "sgd"
            else f"Adam (batch {fast_batch} is past SGD_BATCH_LIMIT {SGD_BATCH_LIMIT}); the seed pipeline SGD"
        )
        + "; fused where the fast path asks and torch has it",
        "threads": torch.get_num_threads(),
        "skip": sorted(args.skip or []),
    }


def _precision_key(precision) -> str:
    return {None: "float32", torch.bfloat16: "bf16", torch.float16: "fp16"}[precision.dtype]


SEED_CONFIG = {
    "loader": "dataloader",
    "batch_size": SEED_BATCH_SIZE,
    "recipe": "seed",
    "optimizer": "sgd",
    "channels_last": False,
    "precision": "float32",
    "fused": False,
    "compile": None,
}
_PRECISION_WORDS = {"float32": "float32", "bf16": "bf16 autocast", "fp16": "fp16 autocast + GradScaler"}


def describe_config(config: dict, settings: dict) -> str:
    loader = {
        "dataloader": "DataLoader over PIL images, ToTensor per sample, num_workers=0",
        "workers": (
            f"DataLoader over PIL images with {settings['dataloader_workers']} workers (persistent), "
            "pin_memory on CUDA, non_blocking copies"
        ),
        "device": "the dataset on the device as one tensor (DeviceLoader, randperm there)",
    }[config["loader"]]
    recipe = recipe_for(config, settings)
    peak = _peak(config["batch_size"], recipe, config.get("max_lr"))
    scaled = _peak(config["batch_size"], {**recipe, "max_lr": None})
    scaling = "square-root scaling" if recipe.get("scaling") == "sqrt" else "linear scaling"
    rule = scaling if peak == scaled else f"capped; the rule gives {scaled:g}"
    decay = "then constant" if recipe["decay"] == "none" else f"{recipe['decay']} decay to 0"
    lr = {
        "seed": f"lr {SEED_LR:g} constant",
        "schedule": f"lr {peak:g} ({rule}) after a {recipe['warmup_epochs']:g}-epoch warm-up, {decay}",
        "linear_scaling_only": f"lr {peak:g} ({rule}) from the first step, constant",
    }[config["recipe"]]
    parts = [loader, f"batch {config['batch_size']}", lr]
    parts.append("channels_last" if config["channels_last"] else "contiguous")
    parts.append(_PRECISION_WORDS[config["precision"]])
    name = "Adam" if config.get("optimizer") == "adam" else "SGD"
    parts.append(f"fused {name}" if config["fused"] else name)
    whole = config.get("compile_scope") == "step"
    if config["compile"]:
        parts.append(
            f"torch.compile mode={config['compile']}"
            + (" (the whole step: model, loss, count)" if whole else "")
        )
    else:
        parts.append("not compiled" + (" (model, loss and count in one LossStep)" if whole else ""))
    if config.get("input_channels", 3) != 3:
        parts.append(f"first convolution on {config['input_channels']} input channels (zeros added)")
    if config.get("cudnn_benchmark"):
        parts.append("the cuDNN autotuner (torch.backends.cudnn.benchmark)")
    return ", ".join(parts)


def recipe_for(config: dict, settings: dict) -> dict:
    """The learning-rate recipe of a config's optimizer: SGD's (the linear rule) or Adam's (square root)."""
    return settings["adam_recipe"] if config.get("optimizer") == "adam" else settings["recipe"]


def _peak(batch_size: int, recipe: dict, max_lr: float | None = None) -> float:
    """The recipe's peak rate at this batch (its scaling rule, then the caps): ``LargeBatchSchedule``'s."""
    caps = [c for c in (recipe["max_lr"], max_lr) if c is not None]
    return LargeBatchSchedule(
        batch_size,
        steps_per_epoch=1,
        epochs=1,
        base_batch_size=recipe.get("base_batch_size", SEED_BATCH_SIZE),
        base_lr=recipe["base_lr"],
        scaling=recipe.get("scaling", "linear"),
        max_lr=min(caps) if caps else None,
    ).peak_lr


class Pipeline:
    """A model, its loader, optimizer, schedule and scaler, built from a config."""

    def __init__(
        self, config: dict, data: dict, device: torch.device, epochs: int, seed: int, settings: dict
    ):
        self.config, self.device = config, device
        torch.manual_seed(seed)  # the same initial weights for every pipeline of a repeat
        model = Tudui().to(device)
        if config.get("input_channels", 3) != 3:  # the same network, its first layer on more channels
            model = widen_first_conv(model, config["input_channels"])
        if config["channels_last"]:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        batch = config["batch_size"]
        # the seed's DataLoader; with workers, also pinned memory on CUDA and copies that do not wait
        self.non_blocking = config["loader"] == "workers"
        if config["loader"] in ("dataloader", "workers"):
            workers = (
                {
                    "num_workers": settings["dataloader_workers"],
                    "pin_memory": device.type == "cuda",
                    "persistent_workers": True,
                }
                if self.non_blocking
                else {}
            )
            self.loader = DataLoader(
                data["train_dataset"],
                batch_size=batch,
                shuffle=True,
                generator=torch.Generator().manual_seed(seed),
                **workers,
            )
        else:
            tensors = data["train_tensors_cl" if config["channels_last"] else "train_tensors"]
            self.loader = DeviceLoader(
                *tensors, batch_size=batch, shuffle=True, generator=torch.Generator(device).manual_seed(seed)
            )
        recipe = recipe_for(config, settings)
        steps = len(self.loader)
        common = {
            "batch_size": batch,
            "steps_per_epoch": steps,
            "epochs": epochs,
            "base_batch_size": recipe["base_batch_size"],
            "base_lr": recipe["base_lr"],
            "max_lr": _peak(batch, recipe, config.get("max_lr")),
            "scaling": recipe.get("scaling", "linear"),
        }
        if config["recipe"] == "seed":
            self.schedule = None
            first_lr = SEED_LR
        elif config["recipe"] == "schedule":
            self.schedule = LargeBatchSchedule(
                **common, warmup_epochs=recipe["warmup_epochs"], decay=recipe["decay"]
            )
            first_lr = self.schedule.lr_at(0)
        else:  # no warm-up or decay: the peak from the first step (for SGD, linear scaling only)
            self.schedule = LargeBatchSchedule(**common, warmup_epochs=0, decay="none")
            first_lr = self.schedule.lr_at(0)
        build = adam if config.get("optimizer") == "adam" else sgd
        self.optimizer, self.optimizer_kind = build(model.parameters(), first_lr, fused=config["fused"])
        self.scaler = None
        net = model
        if config["precision"] == "bf16":
            net = Autocast(model, torch.bfloat16)
        elif config["precision"] == "fp16":
            net = Autocast(model, torch.float16)
            self.scaler = grad_scaler(device)
        # the whole step (model, loss, count of right answers) as one module, compiled as one graph
        self.step = LossStep(net) if config.get("compile_scope") == "step" else None
        if config["compile"]:
            torch.compiler.reset()  # each run compiles afresh: no cache limit reached, no graph reused
            mode = None if config["compile"] == "default" else config["compile"]
            if self.step is not None:
                self.step = torch.compile(self.step, mode=mode, dynamic=False)
            else:
                net = torch.compile(net, mode=mode, dynamic=False)
        self.net = net
        self.lr_text = self.schedule.describe() if self.schedule else f"lr {SEED_LR:g} constant"

    def warm_up(self, data: dict) -> float:
        """Seconds of a few steps per batch shape at lr 0, weights restored after (it compiles here)."""
        x, y = data["train_tensors_cl" if self.config["channels_last"] else "train_tensors"]
        n, batch = x.shape[0], self.config["batch_size"]
        sizes = sorted({min(batch, n), n % batch} - {0}, reverse=True)
        batches = [(x[:size], y[:size]) for size in sizes for _ in range(WARMUP_STEPS)]
        saved = {name: value.detach().clone() for name, value in self.model.state_dict().items()}
        rates = [group["lr"] for group in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] = 0.0
        scaler = grad_scaler(self.device) if self.scaler is not None else None
        with Stopwatch(self.device) as watch:
            train_epoch(self.net, batches, self.optimizer, self.device, scaler=scaler, loss_step=self.step)
        with torch.no_grad():
            for name, value in self.model.state_dict().items():
                value.copy_(saved[name])
        for group, rate in zip(self.optimizer.param_groups, rates, strict=True):
            group["lr"] = rate
        self.optimizer.state.clear()
        return watch.seconds

    def close(self) -> None:
        # persistent DataLoader workers end with their iterator; drop it now, not at exit
        self.loader = None


def _under_the_pipes_autotuner(run):
    """``run(pipe, ...)`` with the cuDNN autotuner on where ``pipe``'s config asks for it
    (``cudnn_benchmark``), off otherwise: the flag is global, so each run sets it and puts it back."""

    @functools.wraps(run)
    def wrapped(pipe, *args, **kwargs):
        with cudnn_autotuner(bool(pipe.config.get("cudnn_benchmark", False))):
            return run(pipe, *args, **kwargs)

    return wrapped


@_under_the_pipes_autotuner
def train_run(
    pipe: Pipeline,
    data: dict,
    device: torch.device,
    epochs: int,
    label: str,
    *,
    test: bool,
    test_after: bool = False,
) -> dict:
    """Train ``pipe`` for ``epochs``, timing each epoch (and testing after it when ``test``).

    With ``test_after`` each epoch's weights are copied (on the device, outside the timing) and
    tested once the run is over: the same accuracies, but the epochs run one after the other with
    no testing between them, as ``scripts/fastpath_probe.py`` runs them (on the H100 the bench
    timed the fast path at 517,000 images/s and the probe at 635,000; whether the testing between
    epochs is why is what the probe's variant "as the bench: tested after every epoch" measures).
    """
    print(f"  {label}:", flush=True)
    record = {
        "lr": pipe.lr_text,
        "optimizer": pipe.optimizer_kind,
        "epoch_seconds": [],
        "epoch_images": [],
        "epoch_train_loss": [],
        "epoch_test_accuracy": [] if test else None,
        "status": "ok",
        "error": None,
        # the flag as it was for this run: cuDNN tunes only the shapes this process had not run before
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }
    if test and test_after:
        record["tested_after_the_run"] = True
    snapshots = []  # with test_after: each epoch's weights, tested once the run is over
    try:
        record["warmup_seconds"] = pipe.warm_up(data)
        print(
            f"    warm-up ({WARMUP_STEPS} steps per batch shape): {record['warmup_seconds']:.2f} s",
            flush=True,
        )
        for epoch in range(epochs):
            with Stopwatch(device) as watch:
                stats = train_epoch(
                    pipe.net,
                    pipe.loader,
                    pipe.optimizer,
                    device,
                    schedule=pipe.schedule,
                    first_step=epoch * len(pipe.loader),
                    scaler=pipe.scaler,
                    non_blocking=pipe.non_blocking,
                    loss_step=pipe.step,
                )
            record["epoch_seconds"].append(watch.seconds)
            record["epoch_images"].append(stats.samples)
            record["epoch_train_loss"].append(stats.loss)
            line = (
                f"    epoch {epoch + 1}: {watch.seconds:7.2f} s, {stats.samples / watch.seconds:10,.0f} "
                f"images/s, lr {stats.lr:.4g}, train loss {stats.loss:.3f}"
            )
            if test and test_after:
                snapshots.append({k: v.detach().clone() for k, v in pipe.model.state_dict().items()})
            elif test:
                _, accuracy = evaluate(
                    pipe.model, data["test_loader"], nn.CrossEntropyLoss(), device, progress=False
                )
                record["epoch_test_accuracy"].append(accuracy)
                line += f", test accuracy {accuracy:.1%}"
            print(line, flush=True)
    except FloatingPointError as error:
        record["status"] = "non-finite"
        record["error"] = f"epoch {len(record['epoch_seconds']) + 1}: {error}"
        print(f"    NON-FINITE: {record['error']}", flush=True)
    finally:
        pipe.close()
    widened = added_weights_max(pipe.model)
    if widened is not None:  # 0.0 while the widened network is still the same network
        record["added_weights_max"] = widened
    for epoch, weights in enumerate(snapshots, 1):
        pipe.model.load_state_dict(weights)
        _, accuracy = evaluate(pipe.model, data["test_loader"], nn.CrossEntropyLoss(), device, progress=False)
        record["epoch_test_accuracy"].append(accuracy)
        print(
            f"    epoch {epoch}: test accuracy {accuracy:.1%} (its weights, tested after the run)", flush=True
        )
    seconds, images = record["epoch_seconds"], record["epoch_images"]
    record["first_epoch_seconds"] = seconds[0] if seconds else None
    # Steady throughput: the median over epochs 2 and later, so that one epoch slowed by other work on
    # a shared machine does not set the figure (every epoch's time is recorded); the mean beside it.
    rates = [n / t for n, t in zip(images[1:], seconds[1:], strict=True)]
    record["images_per_second"] = statistics.median(rates) if rates else None
    record["images_per_second_mean"] = sum(images[1:]) / sum(seconds[1:]) if rates else None
    record["test_accuracy"] = (
        record["epoch_test_accuracy"][-1]
        if test and record["status"] == "ok" and record["epoch_test_accuracy"]
        else None
    )
    return record


def path_configs(settings: dict) -> dict:
    return {
        "seed_pipeline": SEED_CONFIG,
        "fast_path": settings["fast_config"],
        "linear_scaling_only": {**settings["fast_config"], "recipe": "linear_scaling_only"},
    }


def run_paths(data: dict, settings: dict, device: torch.device) -> list[dict]:
    configs = path_configs(settings)
    runs = []
    for repeat in range(settings["repeats"]):
        order = PATHS[repeat % 3 :] + PATHS[: repeat % 3]  # each pipeline in turn goes first
        run = {}
        for path in order:
            epochs = settings["epochs"] if path == "seed_pipeline" else settings["fast_epochs"]
            pipe = Pipeline(configs[path], data, device, epochs, SEED + repeat, settings)
            run[path] = train_run(
                pipe,
                data,
                device,
                epochs,
                f"run {repeat + 1}, {PATH_NAMES[path]}",
                test=True,
                test_after=settings.get("test_after_the_run", False),
            )
        seed, fast = run["seed_pipeline"], run["fast_path"]
        run["ratio"] = (
            fast["images_per_second"] / seed["images_per_second"]
            if fast["images_per_second"] and seed["images_per_second"]
            else None
        )
        target = seed["test_accuracy"]
        seconds, epoch = (
            time_to_accuracy(fast["epoch_seconds"], fast["epoch_test_accuracy"], target)
            if target is not None
            else (None, None)
        )
        run["time_to_accuracy"] = {"target": target, "seconds": seconds, "epoch": epoch}
        print(
            f"  run {repeat + 1}: fast path / seed pipeline = "
            + (f"{run['ratio']:.2f}x" if run["ratio"] else "no ratio")
            + (
                f"; the fast path reached the seed's {target:.1%} after epoch {epoch} ({seconds:.2f} s)"
                if seconds is not None
                else "; the fast path did not reach the seed's accuracy"
            ),
            flush=True,
        )
        runs.append({path: run[path] for path in PATHS} | {k: run[k] for k in ("ratio", "time_to_accuracy")})
    return runs


def _fused_available(device: torch.device) -> tuple[bool, str]:
    probe = nn.Linear(1, 1).to(device)
    _, kind = sgd(probe.parameters(), 0.1, fused=True)
    return kind == "fused", kind


def ladder_steps(device: torch.device, settings: dict) -> list[dict]:
    """The ladder's steps, each the one above plus one change, or skipped with the reason."""
    fast = settings["fast_config"]
    workers = settings["dataloader_workers"]
    steps = []

    def add(key, step, config=None, skipped=None):
        steps.append({"key": key, "step": step, "config": config, "skipped": skipped})

    config = dict(SEED_CONFIG)
    add("seed", "seed pipeline (DataLoader, PIL, batch 64)", config)
    config = {**config, "loader": "workers"}
    extra = ", pin_memory, non_blocking" if device.type == "cuda" else " (pin_memory only on CUDA)"
    add("workers", f"+ {workers} DataLoader worker{'s' if workers > 1 else ''}{extra}", config)
    config = {**config, "loader": "device"}
    add("device", "+ data held on the device", config)
    config = {**config, "batch_size": LADDER_BATCH, "recipe": "schedule"}
    add("large_batch", f"+ batch {LADDER_BATCH} with the recipe", config)
    if fast["channels_last"]:
        config = {**config, "channels_last": True}
        add("channels_last", "+ channels_last", config)
    else:
        add("channels_last", "+ channels_last", skipped="left out (--no-channels-last)")
    words = _PRECISION_WORDS[fast["precision"]]
    if fast["precision"] != "float32":
        config = {**config, "precision": fast["precision"]}
        add("mixed_precision", f"+ {words}", config)
    else:
        why = (
            settings["precision"]["why"]
            if settings["precision"]["used"] == settings["precision"]["name"]
            else ""
        )
        add("mixed_precision", "+ mixed precision", skipped=why or "left out (--float32)")
    available, kind = _fused_available(device)
    if fast["fused"] and available:
        config = {**config, "fused": True}
        add("fused", "+ fused SGD", config)
    else:
        add("fused", "+ fused SGD", skipped=kind if fast["fused"] else "left out (--no-fused)")
    if device.type == "cuda":
        config = {**config, "compile": "default"}
        add("compile", "+ torch.compile (default mode)", config)
        config = {**config, "compile": "reduce-overhead"}
        add("cuda_graphs", "+ CUDA graphs (compile mode='reduce-overhead')", config)
        if fast["compile"] not in (None, "default", "reduce-overhead"):
            config = {**config, "compile": fast["compile"]}
            add("compile_mode", f"+ compile mode={fast['compile']}", config)
    else:
        why = "GPU only: on a CPU it needs a C++ compiler and a long first compile (--compile-mode tries it)"
        add("compile", "+ torch.compile", skipped=why)
        add("cuda_graphs", "+ CUDA graphs (compile mode='reduce-overhead')", skipped="CUDA only")
    whole = fast.get("compile_scope") == "step"
    wide = fast.get("input_channels", 3) != 3
    # The cuDNN autotuner has no step of its own: cuDNN keeps the plan it chose for a convolution's
    # shape for the rest of the process, whatever the flag was when it chose, so a step that only
    # turned the flag on would reuse the plans of the runs before it. It comes with the fast path.
    tuned = bool(fast.get("cudnn_benchmark"))
    changed = fast["batch_size"] != LADDER_BATCH or fast["optimizer"] != config["optimizer"]
    if changed or whole or wide or tuned:
        # on a CPU back to a smaller batch; on a GPU on to a larger one, with Adam: the fast path's
        before = config["compile"]
        config = {
            **config,
            "batch_size": fast["batch_size"],
            "compile": fast["compile"],
            "optimizer": fast["optimizer"],
            **({"compile_scope": "step"} if whole else {}),
            **({"input_channels": fast["input_channels"]} if wide else {}),
            **({"cudnn_benchmark": True} if tuned else {}),
        }
        recipe = "Adam's recipe" if fast["optimizer"] == "adam" else "the recipe"
        widened = f", first convolution on {fast['input_channels']} channels" if wide else ""
        widened += ", the cuDNN autotuner" if tuned else ""
        mode = f", compile mode={fast['compile']}" if fast["compile"] and fast["compile"] != before else ""
        add(
            "fast_batch",
            f"+ batch {fast['batch_size']} with {recipe}{mode}{', the whole step' if whole else ''}{widened} "
            "(this device's fast path)",
            config,
        )
    # Larger batches, for their throughput: at the fast path's peak rate, which the rule would exceed
    # (on the CPU, 50,000 images, bf16: SGD diverged at batch 2,048, Adam failed to learn at 8,192).
    cap = _peak(fast["batch_size"], recipe_for(fast, settings))
    for batch in settings["ladder_batches"]:
        # with the whole step compiled, as the fast path is; the model alone: the mode its batch gets
        mode = fast["compile"] if whole else compile_mode_for(device, batch, "auto")
        add(
            f"batch_{batch}",
            f"batch {batch} ({'Adam' if fast['optimizer'] == 'adam' else 'SGD'}'s recipe, lr capped at "
            f"{min(cap, _peak(batch, recipe_for(fast, settings))):g})"
            + (f", compile {mode}" if mode else ""),
            {**config, "batch_size": batch, "compile": mode, "max_lr": cap, "optimizer": fast["optimizer"]},
        )
    for step in steps:
        step["fast_path"] = step["config"] == fast
    return steps


def run_ladder(data: dict, settings: dict, device: torch.device) -> list[dict]:
    rungs = []
    seed_ips = previous = None
    for step in ladder_steps(device, settings):
        rung = {**step}
        if step["skipped"]:
            print(f"  {step['step']}: skipped ({step['skipped']})", flush=True)
            rungs.append(rung)
            continue
        rung["description"] = describe_config(step["config"], settings)
        pipe = Pipeline(step["config"], data, device, settings["ladder_epochs"], SEED, settings)
        rung.update(
            train_run(pipe, data, device, settings["ladder_epochs"], f"ladder: {step['step']}", test=False)
        )
        rung["train_loss"] = rung["epoch_train_loss"][-1] if rung["epoch_train_loss"] else None
        ips = rung["images_per_second"]
        if seed_ips is None:
            seed_ips = ips
        rung["speedup_previous"] = ips / previous if ips and previous else None
        rung["speedup_seed"] = ips / seed_ips if ips and seed_ips else None
        if ips:
            previous = ips
        rungs.append(rung)
    return rungs


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


def spread(values: list[float | None]) -> dict:
    measured = [v for v in values if v is not None]
    return {
        "first_run": values[0] if values else None,
        "median": statistics.median(measured) if measured else None,
        "min": min(measured) if measured else None,
        "max": max(measured) if measured else None,
        "runs": values,
    }


def summarize(runs: list[dict]) -> dict:
    accuracy = {path: [r[path]["test_accuracy"] for r in runs] for path in PATHS}
    steady = {path: [s for r in runs for s in r[path]["epoch_seconds"][1:]] for path in PATHS}
    return {
        "images_per_second": {path: spread([r[path]["images_per_second"] for r in runs]) for path in PATHS},
        "ratio": spread([r["ratio"] for r in runs]),
        "test_accuracy": {
            path: {
                "runs": values,
                "mean": statistics.mean(values) if values and None not in values else None,
            }
            for path, values in accuracy.items()
        },
        "time_to_accuracy_seconds": spread([r["time_to_accuracy"]["seconds"] for r in runs]),
        "warmup_seconds": {path: [r[path].get("warmup_seconds") for r in runs] for path in PATHS},
        "first_epoch_seconds": {
            path: {
                "runs": [r[path]["first_epoch_seconds"] for r in runs],
                "steady_median": statistics.median(steady[path]) if steady[path] else None,
            }
            for path in PATHS
        },
    }


def recipe_check(runs: list[dict], settings: dict, failures: list[dict]) -> dict:
    """Does the recipe keep the seed's accuracy at the fast path's batch, and does the control (no warm-up
    or decay)?"""
    seed = [r["seed_pipeline"]["test_accuracy"] for r in runs]
    check = {
        "batch_size": settings["fast_config"]["batch_size"],
        "epochs": settings["fast_epochs"],
        "seed_pipeline": seed,
    }
    parts = []
    for path, words in (
        ("fast_path", "with the recipe"),
        ("linear_scaling_only", "with no warm-up or decay"),
    ):
        final = [r[path]["test_accuracy"] for r in runs]
        reached = []
        for run, target in zip(runs, seed, strict=True):
            record = run[path]
            epoch = None
            if target is not None and record["epoch_test_accuracy"]:
                epoch = time_to_accuracy(record["epoch_seconds"], record["epoch_test_accuracy"], target)[1]
            reached.append(epoch)
        failed = sorted({f["run"] for f in failures if f.get("path") == path})
        check[path] = {"final": final, "reached_after_epoch": reached, "failed_runs": failed}
        parts.append(
            f"{words} it ended at {_pct(final)} and reached the seed's accuracy in "
            f"{sum(e is not None for e in reached)} of {len(runs)} runs"
            + (
                f" (after epoch {', '.join(str(e) for e in reached if e is not None)})"
                if any(reached)
                else ""
            )
            + f"; {len(failed)} failed"
        )
    below = [
        b is None or (a is not None and b < a)
        for a, b in zip(check["fast_path"]["final"], check["linear_scaling_only"]["final"], strict=True)
    ]
    check["linear_scaling_only_ended_below_the_recipe"] = below
    check["verdict"] = (
        f"batch {check['batch_size']}, {check['epochs']} epochs, against the seed pipeline's {_pct(seed)} "
        f"after {settings['epochs']}: "
        + "; ".join(parts)
        + f"; no warm-up or decay ended below the recipe (or failed) in {sum(below)} of {len(runs)} runs"
    )
    return check


def _pct(values: list[float | None]) -> str:
    return ", ".join("failed" if v is None else f"{v:.1%}" for v in values)


SEED_LEARNED_ABOVE = 0.15  # test accuracy; below it the seed pipeline has not learned (chance: 0.10)


def _threshold(goal: float, value: float | None, text: str, *, at_most: bool = False) -> dict:
    """One numeric target: met when ``value`` is measured and on the right side of ``goal``."""
    met = value is not None and (value <= goal if at_most else value >= goal)
    return {"target": goal, "measured": value, "met": met, "text": text}


def judge_targets(device: torch.device, runs: list[dict], failures: list[dict]) -> dict:
    target = TARGETS.get(device.type, {})
    checks = {"judged_on": "speed: the first run (every run beside it); accuracy: every run"}
    if not runs:
        return checks
    first = runs[0]
    if "fast_images_per_second_at_least" in target:
        goal = target["fast_images_per_second_at_least"]
        value = first["fast_path"]["images_per_second"]
        checks["fast_images_per_second"] = _threshold(
            goal, value, f"fast path >= {goal:,} images/s ({_fmt(value, ',.0f')})"
        )
    if "ratio_at_least" in target:
        goal = target["ratio_at_least"]
        value = first["ratio"]
        checks["ratio"] = _threshold(
            goal, value, f"fast path >= {goal:g}x the seed pipeline ({_fmt(value, '.2f')}x)"
        )
    if target.get("every_fast_run_reaches_seed_accuracy"):
        reached = [r["time_to_accuracy"]["seconds"] is not None for r in runs]
        fast_failures = [f for f in failures if f.get("path") == "fast_path"]
        seed = [r["seed_pipeline"].get("test_accuracy") for r in runs]
        # Reaching a seed pipeline that learned nothing proves nothing (a short --quick run): then the
        # target is not judged. Chance is 10% on ten classes; 15% is clearly above it.
        learned = all(a is not None and a >= SEED_LEARNED_ABOVE for a in seed)
        text = (
            f"every fast-path run reaches the seed's accuracy, none fails ({sum(reached)} of "
            f"{len(runs)} reached, {len(fast_failures)} failed)"
        )
        if not learned and not fast_failures:
            text += f"; not judged: the seed pipeline ended below {SEED_LEARNED_ABOVE:.0%} in a run"
        checks["accuracy"] = {
            "target": "every fast-path run reaches the seed pipeline's final test accuracy, none fails",
            "measured": {"reached": reached, "failures": len(fast_failures), "seed_accuracy": seed},
            # a failed run fails the target; otherwise a seed that learned nothing leaves it unjudged
            "met": False if fast_failures else (all(reached) if learned else None),
            "text": text,
        }
    if "time_to_accuracy_at_most_seconds" in target:
        goal = target["time_to_accuracy_at_most_seconds"]
        value = first["time_to_accuracy"]["seconds"]
        checks["time_to_accuracy"] = _threshold(
            goal, value, f"time to the seed's accuracy <= {goal:g} s ({_fmt(value, '.2f')} s)", at_most=True
        )
    return checks


def _fmt(value, pattern):
    return "not measured" if value is None else format(value, pattern)


def plot(result: dict, png_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    colours = {"seed_pipeline": "tab:gray", "fast_path": "tab:green", "linear_scaling_only": "tab:orange"}
    runs = result["runs"]
    # 1. images/s of every run: a dot per run, run 1 ringed (log scale: a GPU's range is wide)
    ax = axes[0, 0]
    for i, path in enumerate(PATHS):
        values = [r[path]["images_per_second"] for r in runs]
        shown = [v for v in values if v]
        if shown:
            ax.scatter([i] * len(shown), shown, color=colours[path], zorder=3, s=40)
            if values[0]:
                ax.scatter([i], [values[0]], facecolors="none", edgecolors="black", s=140, zorder=4)
                ax.annotate(
                    f"{values[0]:,.0f}",
                    (i, values[0]),
                    xytext=(12, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=10,
                )
    ax.set_xticks(range(len(PATHS)), [PATH_NAMES[p].replace(" or ", "\nor ") for p in PATHS], fontsize=10)
    ax.set_xlim(-0.5, len(PATHS) - 0.3)
    ax.set_yscale("log")
    ax.set_ylabel("training images/s (dots: every run; ringed: run 1)")
    ratios = [r["ratio"] for r in runs if r["ratio"]]
    ax.set_title(
        "fast path / seed pipeline: " + ", ".join(f"{r:.2f}x" for r in ratios) if ratios else "no ratio",
        fontsize=11,
    )
    # 2. the ladder (linear scale: bar lengths compare)
    ax = axes[0, 1]
    ladder = [r for r in result.get("ladder", []) if not r.get("skipped") and r.get("images_per_second")]
    if ladder:
        ax.barh(
            range(len(ladder)),
            [r["images_per_second"] for r in ladder],
            color=["tab:green" if r.get("fast_path") else "tab:blue" for r in ladder],
        )
        ax.set_yticks(range(len(ladder)), [r["step"] for r in ladder], fontsize=10)
        ax.invert_yaxis()
        for i, r in enumerate(ladder):
            ax.annotate(
                f"{r['speedup_seed']:.2f}x" if r.get("speedup_seed") else "",
                (r["images_per_second"], i),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=10,
            )
        ax.set_xlim(0, 1.15 * max(r["images_per_second"] for r in ladder))
    ax.set_xlabel("training images/s (x the seed pipeline; green: the fast path)")
    ax.set_title("the ladder: each step added to the ones above", fontsize=11)
    # 3. test accuracy after each epoch, against cumulative training seconds
    ax = axes[1, 0]
    for path in PATHS:
        for number, run in enumerate(runs, start=1):
            record = run[path]
            accuracy = record.get("epoch_test_accuracy") or []
            if not accuracy:
                continue
            elapsed = [sum(record["epoch_seconds"][: i + 1]) for i in range(len(accuracy))]
            ax.plot(
                elapsed,
                accuracy,
                "o-",
                color=colours[path],
                alpha=0.8,
                markersize=3,
                label=PATH_NAMES[path] if number == 1 else None,
            )
    for run in runs:
        target = run["time_to_accuracy"]["target"]
        if target is not None:
            ax.axhline(target, color="tab:gray", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # labels at 1, 10, 100 s only
    ax.set(xlabel="training seconds (testing left out)", ylabel="test accuracy after each epoch")
    ax.set_title("time to accuracy (dotted: each run's seed pipeline at the end)", fontsize=11)
    ax.legend(fontsize=10)
    # 4. the sweep
    ax = axes[1, 1]
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
    if rows:
        ax.set(xscale="log", yscale="log")
        sizes = sorted({r["batch_size"] for r in rows})
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.minorticks_off()
        ax.legend(fontsize=10)
    ax.set(xlabel="batch size", ylabel="images/s (one training step)")
    ax.set_title("training step throughput by batch size (random data)", fontsize=11)
    device = result["device"]
    failures = result.get("failures") or []
    fig.suptitle(
        f"{device['name']} ({device['type']}), torch {result['versions']['torch']}, {result['date'][:10]}"
        + (" (quick run)" if result["settings"]["quick"] else "")
        + (f": {len(failures)} FAILED run(s)" if failures else "")
    )
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (2,048 images, 2 epochs, 2 runs)")
    parser.add_argument("--repeats", type=int, help="runs of each pipeline (default 3, quick 2)")
    parser.add_argument("--epochs", type=int, help="epochs per run, 2 or more (default 10, quick 2)")
    parser.add_argument(
        "--train-size", type=int, help="training images (default CPU 10,000, GPU all, quick 2,048)"
    )
    parser.add_argument("--test-size", type=int, help="test images (default CPU 2,000, GPU all, quick 1,000)")
    parser.add_argument(
        "--fast-epochs",
        type=int,
        help="epochs of the fast paths' runs (default: FAST_EPOCHS, quick: as --epochs)",
    )
    parser.add_argument("--ladder-epochs", type=int, help="epochs per ladder step (default 3, quick 2)")
    parser.add_argument("--device", help="device to measure (default: the best available, see pick_device)")
    parser.add_argument(
        "--fast-batch",
        type=int,
        default=None,
        help=f"the fast path's batch (default {FAST_BATCH}, on a CPU {CPU_FAST_BATCH})",
    )
    parser.add_argument(
        "--ladder-batches",
        type=lambda text: [int(b) for b in text.split(",") if b],
        help="larger batches added to the ladder, e.g. 2048,8192 (default: those on CUDA, none on a CPU)",
    )
    parser.add_argument(
        "--fast-base-lr",
        type=float,
        default=SEED_LR,
        help="SGD's batch-64 rate, which its linear scaling rule scales from (default the seed's 0.01); "
        "Adam's recipe scales from helpers.fastpath.ADAM_BASE_LR",
    )
    parser.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="auto",
        help=f"the fast path's optimizer (auto: SGD up to batch {SGD_BATCH_LIMIT}, Adam above)",
    )
    parser.add_argument(
        "--max-lr", type=float, help="cap the scaled rate, SGD's and Adam's, in every path (default: no cap)"
    )
    parser.add_argument("--warmup-epochs", type=float, default=1.0, help="the recipe's warm-up (default 1)")
    parser.add_argument(
        "--decay", choices=("cosine", "linear", "none"), default="cosine", help="the recipe's decay"
    )
    parser.add_argument(
        "--compile-mode",
        choices=COMPILE_MODES,
        default="auto",
        help="the fast path's torch.compile mode (auto: CUDA only; reduce-overhead with the whole step "
        "compiled, else up to batch 1024)",
    )
    parser.add_argument(
        "--compile-scope",
        choices=("auto", "model", "step"),
        default="auto",
        help="what the fast path compiles: the model, or the whole step: the model, the loss and the "
        "count of right answers in one graph (helpers.fastpath.LossStep); auto (default): the whole "
        "step on CUDA (on the H100 with CUDA graphs 806,669 images/s against the model's 516,622), "
        "the model elsewhere",
    )
    parser.add_argument(
        "--input-channels",
        type=int,
        choices=(3, 4, 8),
        default=3,
        help="the fast path's first convolution over this many input channels, the added ones zero "
        "(helpers.fastpath.widen_first_conv: the same network, for cuDNN's channels_last kernels; not "
        "benched on a GPU: the H100 probe found 8 channels slower with the whole step under CUDA graphs, "
        "637,973 images/s against 830,346)",
    )
    parser.add_argument(
        "--test-after-the-run",
        action="store_true",
        help="test each epoch's weights (copied on the device) once a run is over, not between its epochs: "
        "the same accuracies, the epochs timed back to back (not benched on a GPU: in the H100 probe the "
        "bench's code ran at 511,531 images/s so against 564,180 testing between epochs)",
    )
    parser.add_argument(
        "--cudnn-benchmark",
        choices=("off", "on"),
        default="off",
        help="the fast path with the cuDNN autotuner (torch.backends.cudnn.benchmark; CUDA only; off by "
        "default until a GPU has measured it). Compare a bench with it and one without: cuDNN keeps the "
        "plan it chose for a shape for the whole process, so one process cannot measure both",
    )
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out of the fast path")
    parser.add_argument("--no-channels-last", action="store_true", help="leave channels_last out")
    parser.add_argument("--float32", action="store_true", help="leave mixed precision out")
    parser.add_argument("--no-fused", action="store_true", help="leave the fused optimizer out")
    parser.add_argument(
        "--skip",
        action="append",
        choices=tuple(PARTS),
        help="leave a part out (repeatable): the ladder, the timing demo, the batch-size sweep",
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for the results (default results/)")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> dict:
    """The whole benchmark; returns the result (also written to results/)."""
    args = parse_args(argv)
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
    train_tensors = dataset_tensors(train_dataset, device)
    data = {
        "train_dataset": train_dataset,
        "train_tensors": train_tensors,
        "train_tensors_cl": (
            train_tensors[0].contiguous(memory_format=torch.channels_last),
            train_tensors[1],
        ),
        "test_loader": DeviceLoader(*dataset_tensors(test_dataset, device), batch_size=1000),
    }
    settings["paths"] = {
        path: {**config, "description": describe_config(config, settings)}
        for path, config in path_configs(settings).items()
    }
    name = device_name(device)
    print(f"Benchmark on {name} ({device})", flush=True)
    print(f"  fast path: {describe_config(settings['fast_config'], settings)}", flush=True)
    print(f"  precision: {settings['precision']['name']} ({settings['precision']['why']})", flush=True)

    stem = result_stem(device.type, name, quick=args.quick)
    json_path, png_path = out / f"{stem}.json", out / f"{stem}.png"
    command = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    parts = {"ladder": [], "timing_demo": None, "sweep": []}
    pending = [part for part in PARTS if part not in settings["skip"]]
    stopped = []  # what stopped a later part, if one raised

    def save(runs: list[dict]) -> dict:
        """The result as far as it has come, written out: a run stopped by a time limit (a GPU
        machine's 10-minute commands) keeps the parts it finished, marked ``incomplete``."""
        result = {
            "schema": 2,
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
            "ladder": parts["ladder"],
            "summary": summarize(runs),
            "timing_demo": parts["timing_demo"],
            "sweep": parts["sweep"],
            "command": command,
        }
        if pending:
            names = [PARTS[part] for part in pending]
            listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
            result["incomplete"] = f"written before {listed} ran" + "".join(f"; {why}" for why in stopped)
        result["failures"] = bench_failures(result)
        result["recipe_check"] = recipe_check(runs, settings, result["failures"])
        result["targets"] = judge_targets(device, runs, result["failures"])
        result["exit_status"] = 1 if failing(result["failures"]) or stopped else 0
        result["wall_seconds"] = time.perf_counter() - began
        partial = json_path.with_name(
            json_path.name + ".partial"
        )  # a kill mid-write leaves the last whole one
        partial.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, json_path)
        return result

    runs = run_paths(data, settings, device)
    if pending:
        png_path.unlink(missing_ok=True)  # an earlier run's plot, which no longer matches the JSON
        save(runs)
        print(f"  wrote {json_path} (the runs; the rest follows)", flush=True)
    try:
        if "ladder" in pending:
            print("The ladder, one step at a time:", flush=True)
            parts["ladder"] = run_ladder(data, settings, device)
            pending.remove("ladder")
            save(runs)
        if "demo" in pending:
            print("Timing a training loop with and without waiting for the device:", flush=True)
            parts["timing_demo"] = timing_demo(
                device, steps=5 if args.quick else 20, batch_size=64 if args.quick else LADDER_BATCH
            )
            print(f"  {json.dumps(parts['timing_demo'])}")
            pending.remove("demo")
            save(runs)
        if "sweep" in pending:
            print("Training-step throughput by batch size:", flush=True)
            parts["sweep"] = sweep(
                device, [16, 64] if args.quick else [16, 64, 256, 1024], 0.05 if args.quick else 0.5
            )
            pending.remove("sweep")
    except (
        BaseException
    ) as error:  # an error in a later part (or Ctrl-C): the file says so, then it is raised
        stopped.append(f"{PARTS[pending[0]]} stopped by {type(error).__name__}: {error}")
        save(runs)
        raise
    result = save(runs)
    plot(result, png_path)
    print()
    print(describe_result(result))
    print(f"wall time {result['wall_seconds']:.0f} s; wrote {json_path} and {png_path}")
    if failing(result["failures"]):
        print(
            f"FAILED: {len(failing(result['failures']))} run(s) diverged or became non-finite (above): "
            "exit status 1"
        )
    exempt = [f["where"] for f in result["failures"] if f not in failing(result["failures"])]
    if exempt:
        print(
            f"also failed: {', '.join(exempt)} (above): the control shows what the fast path's warm-up and "
            "decay prevent, and a ladder step past the fast path's batch goes beyond what its recipe was "
            "measured for; neither fails the bench"
        )
    return result


def failing(failures: list[dict]) -> list[dict]:
    """The failures that fail the bench: all but the control's (``linear_scaling_only``), whose failing
    shows what the recipe prevents, and those of the ladder's steps past the fast path's batch
    (``batch_<n>``, timed for their throughput at a batch the recipe was not measured to keep its
    accuracy at). Every failure is reported all the same."""
    return [
        f
        for f in failures
        if f.get("path") != "linear_scaling_only" and not str(f.get("path", "")).startswith("batch_")
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; the exit status: 0, or 1 when a run failed (diverged or became non-finite),
    the control's runs excepted."""
    return run(argv)["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
