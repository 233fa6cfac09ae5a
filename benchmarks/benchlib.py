"""What the scripts in ``benchmarks/`` share: the large-batch recipe, the whole step, the verdicts.

Import it from a script in this folder after ``sys.path.insert(0, str(Path(__file__).parent))``.
Nothing in ``helpers/`` or the notebooks imports it.
"""

from __future__ import annotations

import math
import numbers
import platform
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from helpers import _args

# The tutorial's recipe: Tudui with SGD at batch 64, lr 0.01. SGD's scaling rule starts from it.
BASELINE_BATCH_SIZE = 64
BASELINE_LR = 0.01
# Adam's recipe starts from PyTorch's default rate, taken at batch 128, scaled by the square root.
ADAM_BASE_BATCH_SIZE = 128
ADAM_BASE_LR = 0.001

# The three pipelines of a bench run, by their keys in the result files, and their names in reports.
PATH_NAMES = {
    "tutorial_loop": "tutorial's loop",
    "fast_path": "fast path",
    "linear_scaling_only": "no warm-up or decay",
}
NEAR_CHANCE = 0.15  # ten classes: a run below this predicts little better than a guess (10%)
LEARNED = 0.20  # a run at or above this (twice chance) has learned something
LOSS_LIMIT = 2 * math.log(10)  # twice the loss of a uniform guess over ten classes


def make_optimizer(name: str, params: Iterable, lr: float, *, fused: bool) -> torch.optim.Optimizer:
    """``torch.optim.SGD`` (no momentum, as the tutorial) or ``torch.optim.Adam`` for ``name``
    (``"sgd"``, ``"adam"``), fused (one kernel for all the parameters) where asked."""
    if name == "adam":
        return torch.optim.Adam(params, lr, fused=fused or None)
    if name == "sgd":
        return torch.optim.SGD(params, lr, fused=fused or None)
    raise ValueError(f"make_optimizer: name is 'sgd' or 'adam', not {name!r}.")


def scheduled(
    loader: Iterable,
    optimizer: Any,
    schedule: Any,
    first_step: int,
    device: Any,
    *,
    non_blocking: bool = False,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``loader``'s batches on ``device`` (copied with ``non_blocking``), each after
    ``schedule.apply(optimizer, first_step + i)`` set its step's learning rate (``None``: no
    schedule)."""
    for step, (inputs, targets) in enumerate(loader):
        if schedule is not None:
            schedule.apply(optimizer, first_step + step)
        yield (
            inputs.to(device, non_blocking=non_blocking),
            targets.to(device, non_blocking=non_blocking),
        )


class LossStep(nn.Module):
    """The forward half of a training step as one module: ``LossStep(model)(inputs, targets)``.

    Returns the loss and the number of right answers. Pass ``torch.compile(LossStep(model))`` as
    ``helpers.fastpath.fast_path_epoch(..., loss_step=...)`` to compile the model, the loss and the
    count into one graph. ``loss_fn`` defaults to ``nn.CrossEntropyLoss()``.
    """

    def __init__(self, model: nn.Module, loss_fn: nn.Module | None = None) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"LossStep wraps a model (an nn.Module), got {type(model).__name__} "
                f"{_args.shown(model)}."
            )
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss() if loss_fn is None else loss_fn

    def forward(
        self, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = self.model(inputs)
        return self.loss_fn(outputs, targets), (outputs.argmax(dim=1) == targets).sum()


_DECAYS = ("cosine", "linear", "none")
_SCALINGS = ("linear", "sqrt")


@dataclass(frozen=True)
class LargeBatchSchedule:
    """The learning rate of every step for a larger batch: scale it, warm it up, decay it.

    ``LargeBatchSchedule(batch_size=512, steps_per_epoch=98, epochs=10)`` scales ``base_lr`` by
    ``batch_size / base_batch_size`` (``scaling="linear"``, for SGD) or its square root
    (``scaling="sqrt"``, for Adam), caps it at ``max_lr``, warms up linearly from ``base_lr`` over
    ``warmup_epochs``, then decays to ``final_lr`` (``"cosine"``, ``"linear"`` or ``"none"``).
    ``lr_at(step)`` gives the rate of a step counted over all epochs; ``apply(optimizer, step)``
    sets it in every parameter group. ``warmup_epochs=0, decay="none"`` is the peak throughout.
    """

    batch_size: int
    steps_per_epoch: int
    epochs: int
    base_batch_size: int = BASELINE_BATCH_SIZE
    base_lr: float = BASELINE_LR
    warmup_epochs: float = 1.0
    decay: str = "cosine"
    final_lr: float = 0.0
    max_lr: float | None = None
    scaling: str = "linear"

    def __post_init__(self) -> None:
        caller = "LargeBatchSchedule"
        for name in ("batch_size", "steps_per_epoch", "epochs", "base_batch_size"):
            _args.integer(getattr(self, name), name, caller, minimum=1)
        for name in ("base_lr", "warmup_epochs", "final_lr", "max_lr"):
            value = getattr(self, name)
            if value is None and name == "max_lr":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise TypeError(
                    f"{caller}: {name} must be a finite number, got {_args.shown(value)}."
                )
            if value < 0 or (value == 0 and name in ("base_lr", "max_lr")):
                bound = "more than" if name in ("base_lr", "max_lr") else "at least"
                raise ValueError(f"{caller}: {name} must be {bound} 0, got {value}.")
        if self.decay not in _DECAYS:
            raise ValueError(
                f"{caller}: decay must be one of {_DECAYS}, got {_args.shown(self.decay)}."
            )
        if self.scaling not in _SCALINGS:
            raise ValueError(
                f"{caller}: scaling must be one of {_SCALINGS} ('linear' for SGD, 'sqrt' for "
                "Adam), "
                f"got {_args.shown(self.scaling)}."
            )
        if self.final_lr > self.peak_lr:
            raise ValueError(
                f"{caller}: final_lr {self.final_lr} is above the peak {self.peak_lr:g}: "
                "a decay goes down."
            )

    @property
    def scaled_lr(self) -> float:
        """``base_lr`` times ``batch_size / base_batch_size``, or its square root for ``"sqrt"``."""
        factor = self.batch_size / self.base_batch_size
        return self.base_lr * (factor if self.scaling == "linear" else math.sqrt(factor))

    @property
    def peak_lr(self) -> float:
        """``scaled_lr``, at most ``max_lr``."""
        return self.scaled_lr if self.max_lr is None else min(self.scaled_lr, self.max_lr)

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.epochs

    @property
    def warmup_steps(self) -> int:
        """``warmup_epochs`` epochs' worth of steps, rounded, at most all the steps."""
        return min(round(self.warmup_epochs * self.steps_per_epoch), self.total_steps)

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0 is the first step of the first epoch)."""
        step = _args.integer(step, "step", "LargeBatchSchedule.lr_at", minimum=0)
        if step >= self.total_steps:
            raise ValueError(
                f"LargeBatchSchedule.lr_at: step {step} is past the last step "
                f"({self.total_steps - 1}): "
                f"the schedule was made for {self.epochs} epochs of {self.steps_per_epoch} steps."
            )
        peak = self.peak_lr
        warmup = self.warmup_steps
        start = min(self.base_lr, peak)
        if step < warmup:
            return start + (peak - start) * step / warmup
        if self.decay == "none":
            return peak
        done = (step - warmup) / (self.total_steps - warmup)
        if self.decay == "linear":
            return peak + (self.final_lr - peak) * done
        return self.final_lr + (peak - self.final_lr) * 0.5 * (1 + math.cos(math.pi * done))

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set ``lr_at(step)`` in every parameter group of ``optimizer``; return it."""
        lr = self.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def describe(self) -> str:
        """One line: the peak, the warm-up and the decay, in words."""
        ratio = f"{self.batch_size}/{self.base_batch_size}"
        peak = f"lr {self.peak_lr:g}" + (
            f" (max_lr; the rule gives {self.scaled_lr:g})"
            if self.peak_lr < self.scaled_lr
            else f" = {self.base_lr:g} x "
            + (ratio if self.scaling == "linear" else f"sqrt({ratio})")
        )
        warmup = (
            f"a warm-up from {min(self.base_lr, self.peak_lr):g} over {self.warmup_steps} steps"
            if self.warmup_steps
            else "no warm-up"
        )
        decay = "constant" if self.decay == "none" else f"a {self.decay} decay to {self.final_lr:g}"
        rest = self.total_steps - self.warmup_steps
        return f"batch {self.batch_size}: {peak}, {warmup}, then {decay} over {rest} steps"


def device_name(device: torch.device) -> str:
    """The device's name as the driver (CUDA) or the CPU's identification reports it."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        capabilities = getattr(torch.cpu, "get_capabilities", None)
        name = capabilities().get("cpu_name") if capabilities else None
        return str(name or platform.processor() or platform.machine())
    return str(device)


def slug(text: str) -> str:
    """``text`` in lower case with every run of other characters made one ``-``: for file names."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def result_stem(device_type: str, name: str, *, quick: bool = False, prefix: str = "bench") -> str:
    """A result's file name without suffix: ``bench-cuda-nvidia-h100-80gb-hbm3``, ``...-quick``.

    One per kind of device, so a CPU run never overwrites a GPU result, nor a quick run a full one.
    """
    for what, value in (("device_type", device_type), ("name", name)):
        if not isinstance(value, str):
            raise TypeError(
                f"result_stem: {what} must be a string, got {type(value).__name__} {value!r}."
            )
    return f"{prefix}-{device_type}-{slug(name)}" + ("-quick" if quick else "")


def time_to_accuracy(
    epoch_seconds: list[float], epoch_accuracy: list[float | None], target: float
) -> tuple[float | None, int | None]:
    """Training seconds until the first epoch whose test accuracy reaches ``target``, and that
    epoch.

    ``epoch_seconds[i]`` is the training time of epoch ``i + 1``, ``epoch_accuracy[i]`` the test
    accuracy after it. Epochs count from 1; ``(None, None)`` when no epoch reaches ``target``.
    """
    if len(epoch_seconds) != len(epoch_accuracy):
        raise ValueError(
            f"time_to_accuracy: {len(epoch_seconds)} epoch times but {len(epoch_accuracy)} "
            "accuracies: "
            "one of each per epoch"
        )
    if isinstance(target, bool) or not isinstance(target, numbers.Real) or not 0 <= target <= 1:
        raise ValueError(f"time_to_accuracy: target is an accuracy from 0 to 1, got {target!r}")
    elapsed = 0.0
    for epoch, (seconds, accuracy) in enumerate(
        zip(epoch_seconds, epoch_accuracy, strict=True), start=1
    ):
        elapsed += seconds
        if accuracy is not None and accuracy >= target:
            return elapsed, epoch
    return None, None


def run_failure(record: dict, baseline_accuracy: float | None = None) -> str | None:
    """Why one training run failed, or ``None``.

    A run failed when its loss or weights became NaN or infinite, when its last training loss is
    above ``LOSS_LIMIT``, when it ends near chance while the baseline of the same repeat
    (``baseline_accuracy``) learned, or when it learned and then fell back near chance.
    """
    if record.get("status") == "non-finite":
        return (
            f"non-finite: {record.get('error') or 'the loss or the weights became NaN or infinite'}"
        )
    losses = record.get("epoch_train_loss") or []
    if losses and not math.isfinite(losses[-1]):
        return f"non-finite: the training loss of epoch {len(losses)} is {losses[-1]}"
    if losses and losses[-1] > LOSS_LIMIT:
        return (
            f"diverged: the training loss of its last epoch is {losses[-1]:.3g}, "
            f"above {LOSS_LIMIT:.2f} "
            "(twice that of a uniform guess over ten classes)"
        )
    accuracy = record.get("test_accuracy")
    if accuracy is None or accuracy >= NEAR_CHANCE:
        return None
    if baseline_accuracy is not None and baseline_accuracy >= LEARNED:
        return (
            f"diverged: it ended at {accuracy:.1%} test accuracy, near chance (10%), "
            "while the tutorial's "
            f"loop of the same run reached {baseline_accuracy:.1%}"
        )
    history = [a for a in record.get("epoch_test_accuracy") or [] if a is not None]
    if history and max(history) >= LEARNED:
        best = max(history)
        return (
            f"diverged: it reached {best:.1%} test accuracy after epoch "
            f"{history.index(best) + 1}, then "
            f"fell to {accuracy:.1%}, near chance (10%)"
        )
    return None


def bench_failures(result: dict[str, Any]) -> list[dict]:
    """Every failed run and ladder step of a bench result: ``[{"where", "path", "why"}, ...]``."""
    failures = []
    for number, run in enumerate(result.get("runs", []), start=1):
        baseline = run.get("tutorial_loop", {}).get("test_accuracy")
        for path, name in PATH_NAMES.items():
            if path in run:
                why = run_failure(run[path], None if path == "tutorial_loop" else baseline)
                if why:
                    failures.append(
                        {"where": f"{name} run {number}", "path": path, "run": number, "why": why}
                    )
    for rung in result.get("ladder", []):
        why = None if rung.get("skipped") else run_failure({**rung, "test_accuracy": None})
        if why:
            failures.append(
                {"where": f"ladder step {rung['step']!r}", "path": rung["key"], "why": why}
            )
    return failures


def _fmt(value: float | None, pattern: str, missing: str = "none") -> str:
    return missing if value is None else format(value, pattern)


def _data(settings: dict) -> str:
    """The data a result trained on, naming an older version of the synthetic stand-in as such."""
    from helpers.standin import STAND_IN_VERSION

    version = settings.get("stand_in", 1)  # results from before the field were made on version 1
    if settings.get("data") != "synthetic stand-in" or version == STAND_IN_VERSION:
        return str(settings.get("data"))
    return (
        f"synthetic stand-in (version {version}, far easier than today's: "
        "its accuracies do not compare)"
    )


def _header(result: dict) -> list[str]:
    """Where and when a bench result was measured, on what, and its pipelines."""
    device = result["device"]
    settings = result["settings"]
    runs = result.get("runs", [])
    when = f"{device['name']} ({device['type']}), measured {result['date'][:10]} with torch "
    when += result["versions"]["torch"]
    if device["type"] == "cuda":
        when += f", CUDA {result['versions'].get('cuda')}"
    if settings.get("quick"):
        when += " (a quick run)"
    fast_epochs = settings.get("fast_epochs", settings["epochs"])
    what = (
        f"Tudui on {settings['train_size']:,} {_data(settings)} training images, {len(runs)} "
        f"run(s) of each pipeline: the baseline {settings['epochs']} epochs per run, the fast "
        f"paths {fast_epochs}; tested on {settings['test_size']:,} images after every epoch "
        "(images/s: the median epoch from epoch 2 on)"
    )
    lines = [when, what]
    if result.get("incomplete"):
        lines.insert(
            1, f"INCOMPLETE: {result['incomplete']}: what follows is what the bench finished"
        )
    for path, name in PATH_NAMES.items():
        if path in settings.get("paths", {}):
            lines.append(f"  {name}: {settings['paths'][path]['description']}")
    return lines


def _run_line(number: int, run: dict) -> str:
    """One run of the three pipelines: images/s, test accuracy, the ratio, the time to accuracy."""
    parts = []
    for path, name in PATH_NAMES.items():
        if run.get(path) is None:
            continue
        speed = _fmt(run[path].get("images_per_second"), ",.0f", "no")
        accuracy = _fmt(run[path].get("test_accuracy"), ".1%", "not measured")
        broken = " (non-finite)" if run[path].get("status") == "non-finite" else ""
        parts.append(f"{name} {speed} images/s, test {accuracy}{broken}")
    ratio = _fmt(run.get("ratio"), ".2f", "no")
    line = f"run {number}: " + "; ".join(parts) + f"; fast path / baseline {ratio}x"
    reach = run.get("time_to_accuracy") or {}
    if reach.get("target") is not None and reach.get("seconds") is not None:
        line += (
            f"; fast path reached the baseline's {reach['target']:.1%} after epoch "
            f"{reach['epoch']}, {reach['seconds']:.2f} s"
        )
    elif reach.get("target") is not None:
        line += f"; fast path never reached the baseline's {reach['target']:.1%}"
    return line


def _ladder_lines(ladder: list[dict], epochs: int | None) -> list[str]:
    """The ladder, a step a line: images/s, x the step before, x the baseline."""
    if not ladder:
        return []
    lines = [
        f"ladder, each step added to the ones above ({epochs} epochs each; "
        "x the step before, x the baseline):"
    ]
    width = max(len(rung["step"]) for rung in ladder)
    for rung in ladder:
        if rung.get("skipped"):
            shown = f"skipped: {rung['skipped']}"
        else:
            shown = f"{_fmt(rung.get('images_per_second'), '12,.0f', 'no')} images/s"
        text = f"  {rung['step']:<{width}}  {shown}"
        if rung.get("speedup_previous") is not None:
            text += f"  {rung['speedup_previous']:6.2f}x  {rung['speedup_tutorial']:7.2f}x"
        if rung.get("fast_path"):
            text += "  <- the fast path"
        lines.append(text)
    return lines


def _verdict(met: bool | None) -> str:
    if met is None:
        return "not judged"
    return "met" if met else "NOT met"


def describe_result(result: dict) -> str:
    """What a bench result (schema 2) measured, on which hardware and when: every run, never a
    mean alone.

    Each run's images per second, test accuracy and ratio, the time to the baseline's accuracy,
    the warm-up, the ladder of steps, a ``FAILURE`` line for every failure recorded, and the
    targets.
    """
    summary = result["summary"]
    lines = _header(result)
    for number, run in enumerate(result.get("runs", []), start=1):
        lines.append(_run_line(number, run))
    ratio = summary.get("ratio") or {}
    if ratio.get("runs"):
        every = ", ".join(_fmt(r, ".2f") + "x" for r in ratio["runs"])
        first = _fmt(ratio["first_run"], ".2f", "no")
        lines.append(f"fast path / baseline: {first}x in the first run; every run: {every}")
    for path, seconds in (summary.get("warmup_seconds") or {}).items():
        each = ", ".join(f"{s:.2f}" for s in seconds)
        lines.append(f"warm-up and compilation of {PATH_NAMES.get(path, path)} (s): {each}")
    if result.get("recipe_check"):
        lines.append(f"recipe check: {result['recipe_check']['verdict']}")
    lines += _ladder_lines(result.get("ladder") or [], result["settings"].get("ladder_epochs"))
    for failure in result.get("failures") or []:
        lines.append(f"FAILURE: {failure['where']}: {failure['why']}")
    targets = result.get("targets") or {}
    verdicts = [
        f"{target.get('text') or name.replace('_', ' ')}: {_verdict(target['met'])}"
        for name, target in targets.items()
        if isinstance(target, dict) and "met" in target
    ]
    if verdicts:
        judged_on = targets.get("judged_on", "as recorded")
        lines.append(f"targets ({judged_on}): " + "; ".join(verdicts))
    return "\n".join(lines)
