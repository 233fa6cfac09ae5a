"""Where the GPU fast path's step at batch 2,048 spends its time: a one-off probe (issue 12).

The third H100 bench measured the fast path (``make bench``: Tudui, data on the device, batch
2,048, fused Adam with a schedule, channels_last, bf16 autocast, ``torch.compile``) at 517,000 to
546,000 images/s, while the first run's throughput probe (``tudui-throughput-probe.json``: SGD
with momentum, random batches, nothing else in the loop) reached 814,000 at the same batch. This
script times the fast path's own loop (``helpers.fastpath.train_epoch``) with one thing changed
at a time, and profiles one epoch of it (``--profile``: the loop, the whole step, the whole step
with the cuDNN autotuner; each profile's costliest kernels kept in the JSON), so that the next
change to the fast path is chosen from measurements rather than guessed. Two variants run the
bench's own code instead (its ``Pipeline`` and ``train_run``), testing between epochs or after
the run, to find why the bench measured less.

    python3 scripts/fastpath_probe.py [--out results/gpu/<device>/fastpath-probe.json]
    python3 scripts/fastpath_probe.py --set next       # what the next GPU session measures

Every figure is the median of ``--epochs`` timed epochs (50,000 images each) after two untimed
ones, which compile; each epoch's rate is recorded too, and each part's seconds (compiling
included), to plan the next lease. The variants and the profile with the cuDNN autotuner run
together in one fresh process. On a CPU it runs (slowly, with ``--train-size``; ``--no-compile``
leaves out the compiling, which there takes a C++ compiler and minutes) so that it can be tested,
but only a GPU's figures mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.data import load_cifar10  # noqa: E402
from helpers.devices import pick_device  # noqa: E402
from helpers.fastpath import (  # noqa: E402
    ADAM_BASE_BATCH_SIZE,
    ADAM_BASE_LR,
    Autocast,
    DeviceLoader,
    LargeBatchSchedule,
    LossStep,
    adam,
    added_weights_max,
    cudnn_autotuner,
    dataset_tensors,
    sgd,
    train_epoch,
    widen_first_conv,
)
from helpers.models import Tudui  # noqa: E402
from helpers.train import evaluate  # noqa: E402

VARIANTS = {
    "fast path (Adam, schedule, compile default)": {},
    "constant lr (no schedule)": {"schedule": False},
    "fused SGD, constant lr 0.004": {"optimizer": "sgd", "schedule": False},
    "compile mode=reduce-overhead (CUDA graphs)": {"compile": "reduce-overhead"},
    "loss and argmax compiled with the model": {"whole_step": True},
    "whole step compiled, no per-step statistics": {"whole_step": True, "no_stats": True},
    "batch 4096": {"batch": 4096},
    "not compiled": {"compile": None},
    # added after the first run, from what it showed (run on the H100 in the second probe,
    # fastpath-probe-2026-11-23.json): the two changes that paid most, together
    "whole step compiled, mode=reduce-overhead": {"whole_step": True, "compile": "reduce-overhead"},
    "whole step compiled, mode=reduce-overhead, batch 4096": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "batch": 4096,
    },
    # added after the first run (run in the second probe). Why the bench measured 517,000 images/s
    # where this probe measured 635,000 for the same fast path: the bench tests after every epoch
    # (outside its timing) and this probe does not.
    "as the bench: tested after every epoch": {"test_between": True},
    # the bench's own code (its Pipeline, warm-up at lr 0 and train_run) in this process: if these two
    # differ, testing between epochs is the cause; if both run as fast as this probe's loop, the cause
    # is in the bench's process (what ran before); if both run as slowly as the bench, in its code
    "the bench's own code, tested between epochs": {"bench": "between"},
    "the bench's own code, tested after the run": {"bench": "after"},
    # Why one convolution kernel took 24% of the step's kernel time: the first convolution has 3
    # input channels, and cuDNN's fast bf16 kernels for channels_last want a multiple of 8 (or 4).
    # That layer pads its input with zero channels and has zero weights for them: the same network
    # (helpers.fastpath.PaddedInputConv2d), fed the same images.
    "first convolution on 4 input channels (zeros added)": {"pad": 4},
    "first convolution on 8 input channels (zeros added)": {"pad": 8},
    "whole step compiled, mode=reduce-overhead, 8 input channels": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "pad": 8,
    },
    # added after the second probe (not yet run on a GPU). With the whole step under CUDA graphs a step
    # took about as long as its kernels, so 1,000,000 images/s needs faster kernels. In the profile,
    # one generic NHWC convolution kernel (convolve_common_engine_float_NHWC) took 23.9% of the
    # kernel time, picked by cuDNN's heuristics: the cuDNN autotuner times the algorithms instead
    # (helpers.fastpath.cudnn_autotuner). Each of these runs in a process of its own (main's
    # run_alone): cuDNN keeps the plan it chose for a shape for the whole process, whatever the flag
    # was then. max-autotune: Inductor times candidate kernels of its own (it leaves the flag alone).
    "whole step, CUDA graphs, cuDNN autotuner": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "cudnn_benchmark": True,
    },
    "whole step, CUDA graphs, cuDNN autotuner, batch 4096": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "cudnn_benchmark": True,
        "batch": 4096,
    },
    "whole step, CUDA graphs, cuDNN autotuner, batch 8192": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "cudnn_benchmark": True,
        "batch": 8192,
    },
    "whole step, CUDA graphs, cuDNN autotuner, 8 input channels": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "cudnn_benchmark": True,
        "pad": 8,
    },
    # added after the cuDNN autotuner's variants (not yet run on a GPU). The fast path keeps bf16 and
    # channels_last, but nothing has set them against NCHW and float32 with the whole step under CUDA
    # graphs, and the measurements that exist disagree. Eagerly at batch 512 (launch-bound) neither
    # paid clearly: the two bench ladders of 2026-11-23 gave channels_last 1.05x and 0.90x the step
    # before, bf16 autocast 0.76x and 0.97x, and float32 in NCHW ran at 332,424 images/s against
    # 142,540 for bf16 with channels_last (tudui-throughput-probe.json); eagerly at batch 8,192 the same
    # probe measured 616,651 images/s in bf16 with channels_last against 423,701 in float32 (1.46x).
    # A step's 151.8 GFLOP at 2,048 take 0.20 ms at the 770 TFLOP/s measured for bf16 matrix products,
    # under a tenth of the step's 2.47 ms under CUDA graphs. So the fastest variant in the default (NCHW)
    # layout, in float32 (cuDNN's convolutions in TF32, its default), and both; each is an option of
    # make bench (--no-channels-last, --float32).
    "whole step, CUDA graphs, NCHW": {"whole_step": True, "compile": "reduce-overhead", "layout": "nchw"},
    "whole step, CUDA graphs, float32": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "precision": "float32",
    },
    "whole step, CUDA graphs, float32, NCHW": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "precision": "float32",
        "layout": "nchw",
    },
    "whole step, CUDA graphs, cuDNN autotuner, NCHW": {
        "whole_step": True,
        "compile": "reduce-overhead",
        "cudnn_benchmark": True,
        "layout": "nchw",
    },
    "whole step compiled, mode=max-autotune": {"whole_step": True, "compile": "max-autotune"},
}
# --set next: what the next GPU session measures first (README, "Checking on a GPU"): the fast path's
# own step at 2,048 and 4,096 (the same run's baseline), the autotuner's variants (together in one
# fresh process), the layouts and precisions above, max-autotune last; the profiles of the whole
# step with and without the autotuner (the loop's was taken in both earlier probes)
SETS = {
    "next": (
        "whole step compiled, mode=reduce-overhead",
        "whole step compiled, mode=reduce-overhead, batch 4096",
        "whole step, CUDA graphs, cuDNN autotuner",
        "whole step, CUDA graphs, cuDNN autotuner, batch 4096",
        "whole step, CUDA graphs, cuDNN autotuner, batch 8192",
        "whole step, CUDA graphs, NCHW",
        "whole step, CUDA graphs, float32",
        "whole step, CUDA graphs, float32, NCHW",
        "whole step, CUDA graphs, cuDNN autotuner, NCHW",
        "whole step compiled, mode=max-autotune",
    ),
}
SET_PROFILES = {"next": ("step", "step-autotuner")}
# the profiles: the loop as the bench ran it before 2026-11-23's second bench (profiled in both
# probes), and the whole step, compiled in the default mode (the kernels that run under CUDA graphs,
# each with the operation that launched it), with cuDNN's heuristics and, in a process of its own,
# with its autotuner
PROFILES = {
    "loop": {"whole_step": False, "cudnn_benchmark": False},
    "step": {"whole_step": True, "cudnn_benchmark": False},
    "step-autotuner": {"whole_step": True, "cudnn_benchmark": True},
}
TOP_KERNELS = 12  # kept in the JSON for each profile


def _epoch_whole_step(step_fn, loader, optimizer, schedule, first_step, device, no_stats):
    total = torch.zeros((), device=device)
    right = torch.zeros((), device=device, dtype=torch.long)
    samples = 0
    for i, (inputs, targets) in enumerate(loader):
        if schedule is not None:
            schedule.apply(optimizer, first_step + i)
        loss, correct = step_fn(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if not no_stats:
            total += loss.detach() * targets.size(0)
            right += correct
        samples += targets.size(0)
    float(total)  # one read-back an epoch, as train_epoch does
    return samples


def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_script", ROOT / "scripts" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def run_bench_code(name: str, change: dict, images, labels, device, epochs: int, test_loader) -> dict:
    """The bench's fast path for this device, built and trained by scripts/bench.py's own code."""
    bench = _bench_module()
    after = change["bench"] == "after"
    args = bench.parse_args(["--device", device.type, *(["--test-after-the-run"] if after else [])])
    settings = bench.settings_for(device, args)
    data = {"train_tensors_cl": (images, labels), "test_loader": test_loader}
    data["train_tensors"] = (images.contiguous(), labels)
    total_epochs = epochs + 2
    pipe = bench.Pipeline(settings["fast_config"], data, device, total_epochs, bench.SEED, settings)
    run = bench.train_run(pipe, data, device, total_epochs, name, test=True, test_after=after)
    rates = [n / t for n, t in zip(run["epoch_images"][2:], run["epoch_seconds"][2:], strict=True)]
    record = {
        "bench_code": True,
        "config": settings["fast_config"],
        "tested_after_the_run": after,
        "warmup_seconds": round(run["warmup_seconds"], 2),
        "first_two_epochs_seconds": round(sum(run["epoch_seconds"][:2]), 2),
        "epoch_images_per_second": [round(r) for r in rates],
        "images_per_second": round(statistics.median(rates)),
        "epoch_test_accuracy": [round(a, 4) for a in run["epoch_test_accuracy"]],
    }
    print(f"{name:48} {record['images_per_second']:>10,} images/s  (epochs: "
          f"{', '.join(f'{r:,.0f}' for r in rates)})", flush=True)  # fmt: skip
    return record


def run_variant(name: str, change: dict, images, labels, device, epochs: int, test_loader=None) -> dict:
    if change.get("bench"):
        return run_bench_code(name, change, images, labels, device, epochs, test_loader)
    with cudnn_autotuner(change.get("cudnn_benchmark", False)):
        return _run_variant(name, change, images, labels, device, epochs, test_loader)


def _run_variant(name: str, change: dict, images, labels, device, epochs: int, test_loader) -> dict:
    began = time.perf_counter()
    batch = change.get("batch", 2048)
    torch.manual_seed(0)
    torch.compiler.reset()
    # the model and the images in channels_last (the fast path's layout), or in the default NCHW one
    layout = torch.contiguous_format if change.get("layout") == "nchw" else torch.channels_last
    model = Tudui().to(device).to(memory_format=layout)
    if change.get("pad"):
        model = widen_first_conv(model, change["pad"]).to(memory_format=layout)
    images = images.contiguous(memory_format=layout)  # main's are channels_last: a copy for NCHW
    test_between = change.get("test_between", False)
    if test_between and test_loader is None:
        raise ValueError(f"{name}: needs test images (main loads them when a variant tests)")
    loader = DeviceLoader(
        images, labels, batch_size=batch, shuffle=True, generator=torch.Generator(device).manual_seed(0)
    )
    total_epochs = epochs + 2
    schedule = None
    if change.get("schedule", True):
        schedule = LargeBatchSchedule(
            batch_size=batch,
            steps_per_epoch=len(loader),
            epochs=total_epochs,
            base_batch_size=ADAM_BASE_BATCH_SIZE,
            base_lr=ADAM_BASE_LR,
            scaling="sqrt",
        )
    if change.get("optimizer", "adam") == "adam":
        optimizer, kind = adam(model.parameters(), 0.004, fused=True)
    else:
        optimizer, kind = sgd(model.parameters(), 0.004, fused=True)
    # bf16 autocast on a GPU (the fast path's), float32 where asked (cuDNN's convolutions then in TF32,
    # as torch.backends.cudnn.allow_tf32 leaves them by default) and on a CPU
    bf16 = device.type == "cuda" and change.get("precision", "bf16") == "bf16"
    net = Autocast(model, torch.bfloat16) if bf16 else model
    mode = change.get("compile", "default")
    whole = change.get("whole_step", False)
    if whole:
        net = LossStep(net)  # the first run used a copy of it, written before LossStep existed
    if mode is not None:
        net = torch.compile(net, mode=None if mode == "default" else mode, dynamic=False)
    rates, warmup, accuracy = [], None, []
    for epoch in range(total_epochs):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        if whole:
            samples = _epoch_whole_step(
                net, loader, optimizer, schedule, epoch * len(loader), device, change.get("no_stats", False)
            )
        else:
            samples = train_epoch(
                net, loader, optimizer, device, schedule=schedule, first_step=epoch * len(loader)
            ).samples
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        if epoch < 2:
            warmup = seconds if warmup is None else warmup + seconds
        else:
            rates.append(samples / seconds)
        if test_between:  # as scripts/bench.py does: the model itself, outside the timing
            accuracy.append(
                round(evaluate(model, test_loader, nn.CrossEntropyLoss(), device, progress=False)[1], 4)
            )
    record = {
        "batch": batch,
        "optimizer": kind,
        "compile": mode,
        "schedule": schedule is not None,
        "whole_step": whole,
        "no_stats": change.get("no_stats", False),
        "input_channels": change.get("pad", 3),
        "layout": "nchw" if layout == torch.contiguous_format else "channels_last",
        "precision": "bf16" if bf16 else "float32",
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "tested_after_every_epoch": test_between,
        "first_two_epochs_seconds": round(warmup, 2),
        "epoch_images_per_second": [round(r) for r in rates],
        "images_per_second": round(statistics.median(rates)),
    }
    if test_between:
        record["epoch_test_accuracy"] = accuracy
    if change.get("pad"):  # 0.0 while the widened network is still the same network
        record["added_weights_max"] = added_weights_max(model)
    record["seconds"] = round(time.perf_counter() - began, 1)  # all of it, compiling included
    print(
        f"{name:48} {record['images_per_second']:>10,} images/s  (epochs: "
        f"{', '.join(f'{r:,.0f}' for r in rates)}; first two {warmup:.1f} s)",
        flush=True,
    )
    return record


def profile_fast_path(images, labels, device, name: str = "loop", *, compiled: bool = True) -> dict:
    """One epoch under torch.profiler: the GPU's busy time against the wall time, and the kernels
    that took most of it. ``name`` is one of ``PROFILES``: the loop as the bench ran it before (the
    model compiled alone), or the whole step compiled, with or without the cuDNN autotuner.
    ``compiled=False`` (``--no-compile``) leaves ``torch.compile`` out, as a CPU always does."""
    began = time.perf_counter()
    with cudnn_autotuner(PROFILES[name]["cudnn_benchmark"]):
        result = _profile(images, labels, device, name, compiled)
    return {**result, "seconds": round(time.perf_counter() - began, 1)}


def _profile(images, labels, device, name: str, compiled: bool) -> dict:
    from torch.profiler import ProfilerActivity, profile

    whole = PROFILES[name]["whole_step"]
    torch.manual_seed(0)
    torch.compiler.reset()
    model = Tudui().to(device).to(memory_format=torch.channels_last)
    loader = DeviceLoader(
        images, labels, batch_size=2048, shuffle=True, generator=torch.Generator(device).manual_seed(0)
    )
    optimizer, _ = adam(model.parameters(), 0.004, fused=True)
    net = Autocast(model, torch.bfloat16) if device.type == "cuda" else model
    # compiled in the default mode: the kernels that run under CUDA graphs, each with the operation
    # that launched it. On a CPU (where the probe runs only to be tested) not compiled: that needs a
    # C++ compiler and minutes
    compiled = compiled and device.type == "cuda"

    def compile_(module):
        return torch.compile(module, dynamic=False) if compiled else module

    if whole:
        step = compile_(LossStep(net))

        def epoch():
            return _epoch_whole_step(step, loader, optimizer, None, 0, device, False)
    else:
        net = compile_(net)

        def epoch():
            return train_epoch(net, loader, optimizer, device).samples

    for _ in range(2):
        epoch()
    if device.type == "cuda":
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:  # shapes: which convolution
        start = time.perf_counter()
        epoch()
        if device.type == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    events = prof.key_averages()

    from torch.autograd import DeviceType

    def device_time(e):
        return getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)

    # the kernels themselves (events on the device), as the table's "Self CUDA time total" counts
    # them: an operator's row on the CPU repeats its kernels' time (the first recording, which
    # summed every row, said 4.78 ms a step where the kernels took 2.36 ms)
    kernels = sorted((e for e in events if e.device_type == DeviceType.CUDA), key=device_time, reverse=True)
    kernel_us = sum(device_time(e) for e in kernels)
    if device.type != "cuda":
        sort_by = "self_cpu_time_total"
    elif hasattr(events[0], "self_device_time_total"):
        sort_by = "self_device_time_total"
    else:
        sort_by = "self_cuda_time_total"
    table = events.table(sort_by=sort_by, row_limit=25, max_name_column_width=60)
    print(f"profile {name!r}:", flush=True)
    print(table, flush=True)
    steps = len(loader)
    callers = kernel_callers(prof.events(), steps)
    result = {
        "whole_step": whole,
        "compiled": compiled,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "steps": steps,
        "wall_ms_per_step": round(wall * 1000 / steps, 3),
        "gpu_kernel_ms_per_step": round(kernel_us / 1000 / steps, 3),
        "gpu_busy_fraction": round(kernel_us / 1e6 / wall, 3),
        # each kernel's name (cut to 120 characters), its time per step and its launches per step
        "top_kernels": [
            {
                "name": e.key[:120],
                "us_per_step": round(device_time(e) / steps, 1),
                "share": round(device_time(e) / kernel_us, 4) if kernel_us else None,
                "calls_per_step": round(e.count / steps, 2),
                # the operators that launched it, with their inputs' shapes, most launches first:
                # which convolution a cuDNN kernel ran (its name does not say), forward or backward
                "launched_by": callers.get(e.key, [])[:3],
            }
            for e in kernels[:TOP_KERNELS]
        ],
        "note": "wall time under the profiler (which slows the CPU side; recording the operators' input "
        "shapes, as the profiles since the third probe do, slows it more, so their wall time is not "
        "comparable with the earlier probes'); kernel time: the device events' self time (the table's "
        "'Self CUDA time total')",
    }
    print(json.dumps({k: v for k, v in result.items() if k != "top_kernels"}), flush=True)
    return result


def kernel_callers(events, steps: int = 1) -> dict[str, list[str]]:
    """Each device kernel's name -> the operators that launched it, most launches first, each as
    ``"<operator> <its inputs' shapes>: <launches a step>"``, from a profile's events
    (``prof.events()``, taken with ``record_shapes=True``) over ``steps`` steps. PyTorch's profiler
    lists a kernel under the innermost operator that was running when it was launched (torch's
    ``autograd/profiler.py``, ``_parse_kineto_results``): for a cuDNN kernel an operator such as
    ``aten::cudnn_convolution`` or ``aten::convolution_backward``, whose input shapes tell which of
    ``Tudui``'s convolutions it ran (the first has 3 input channels). Kernels listed under anything
    but an ``aten::`` operator (a compiled graph's own, whose names say what they fuse) are left
    out. A 0-d tensor's shape is ``[]``, and empty shapes are not shown."""
    found: dict[str, dict[str, int]] = {}
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        shapes = [list(shape) for shape in (event.input_shapes or ()) if shape]
        for kernel in getattr(event, "kernels", None) or ():
            counts = found.setdefault(kernel.name, {})
            caller = f"{event.name} {shapes}"
            counts[caller] = counts.get(caller, 0) + 1
    return {
        name: [
            f"{caller}: {n / steps:g} a step"
            for caller, n in sorted(counts.items(), key=lambda item: -item[1])
        ]
        for name, counts in found.items()
    }


def run_alone(args: argparse.Namespace, variants: list[str], profiles: list[str]) -> dict:
    """The variants and profiles with the cuDNN autotuner, run by this script in one fresh process.

    cuDNN keeps the plan it chose for a convolution's shape for the rest of the process, whatever
    ``torch.backends.cudnn.benchmark`` was when it chose (the key of PyTorch's plan cache has no
    place for the flag), so after the variants without the autotuner have run a shape, turning the
    flag on changes nothing for it. In a fresh process that runs only the autotuner's parts, every
    shape is first met with the flag on; one process for all of them, since a process's start (the
    imports, the first CUDA call, the data) took about 10 s on the H100 (07-33: 11.0 s for one matrix
    product in a new process). Its printout goes to this one's. Returns ``{"variants": ...,
    "profiles": ...}``, each part's result with ``own_process`` set: what the process recorded (it
    saves after each part), and for each part it did not record (it failed, or ran past
    ``--child-timeout`` seconds and was stopped) a failure with its exit status or ``"timeout"``."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "alone.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child", "--out", str(out)]
        command += ["--epochs", str(args.epochs)]
        for option, value in (("--train-size", args.train_size), ("--test-size", args.test_size)):
            command += [option, str(value)] if value is not None else []
        command += ["--no-compile"] if args.no_compile else []
        for name in variants:
            command += ["--only", name]
        for name in profiles or ["none"]:
            command += ["--profile", name]
        sys.stdout.flush()
        if torch.cuda.is_available():  # this process's cached memory back to the GPU, for the autotuner's
            torch.cuda.empty_cache()  # trials (it skips an algorithm whose workspace it cannot allocate)
        began = time.perf_counter()
        try:
            status = subprocess.run(command, cwd=ROOT, timeout=args.child_timeout).returncode
        except subprocess.TimeoutExpired:
            status = "timeout"
        seconds = round(time.perf_counter() - began, 1)
        child = read_record(out)
    return {**collect(child, variants, profiles, status), "seconds": seconds}


def read_record(path: Path) -> dict:
    """A probe's JSON record, or ``{}`` where there is none or it cannot be read whole. The probe writes
    it whole after each part (a new file, renamed over the old), so a process stopped while writing
    leaves the last one; an unreadable file still loses only the fresh process's results, not the
    probe's."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def collect(child: dict, variants: list[str], profiles: list[str], status) -> dict:
    """``run_alone``'s results from its process's record ``child``: each part it recorded, marked
    ``own_process`` (with the process's id), and each part it did not, a failure with ``status``."""
    found = {}
    for kind, names in (("variants", variants), ("profiles", profiles)):
        found[kind] = {}
        for name in names:
            result = child.get(kind, {}).get(name)
            if result is None:
                print(f"FAILED: {name}: its process ended with status {status}", flush=True)
                result = {"status": "failed", "exit_status": status}
            found[kind][name] = {**result, "own_process": True}
            if "process" in child:
                found[kind][name]["process"] = child["process"]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs per variant (after 2 untimed)")
    parser.add_argument("--train-size", type=int, default=None)
    parser.add_argument("--test-size", type=int, default=None, help="test images, for a variant that tests")
    parser.add_argument("--only", action="append", default=None, help="variant names to run (default all)")
    parser.add_argument(
        "--set",
        choices=tuple(SETS),
        default=None,
        help="a named set of variants and profiles instead of all of them: next, what the next GPU session "
        "measures (the README's plan); --only adds variants to it, --profile replaces its profiles",
    )
    parser.add_argument(
        "--same-process",
        action="store_true",
        help="run the cuDNN autotuner's variants and profile in this process too (by default they run "
        "together in a fresh one: cuDNN keeps the plan it chose for a shape, whatever the flag was then)",
    )
    parser.add_argument(
        "--child-timeout",
        type=float,
        default=300.0,
        help="seconds the fresh process of the autotuner's parts may run before it is stopped and what it "
        "had not finished is recorded as failed (default 300)",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="run every variant and profile without torch.compile, but those of the bench's own code, which "
        "compile as the bench does (to test the probe where compiling takes a C++ compiler and minutes, as "
        "on a CPU; its figures then measure nothing of the fast path)",
    )
    # run_alone's process: only the variants (--only) and profiles (--profile) given, in this process
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile",
        action="append",
        choices=(*PROFILES, "none"),
        default=None,
        help="profiles to take (repeatable; default on CUDA all of them, on a CPU none): loop: the model "
        "compiled alone; step: the whole step; step-autotuner: the whole step with the cuDNN autotuner",
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    unknown = sorted(set(args.only or ()) - set(VARIANTS))
    if unknown:  # before any data is made
        parser.error(f"no variant named {', '.join(map(repr, unknown))}; the variants: {', '.join(VARIANTS)}")
    device = pick_device()
    wanted = None if args.only is None and args.set is None else {*(args.only or ()), *SETS.get(args.set, ())}
    if args.profile is None and args.set is not None:
        profiles = list(SET_PROFILES[args.set])
    elif args.profile is None:
        profiles = list(PROFILES) if device.type == "cuda" else []
    else:
        profiles = [name for name in dict.fromkeys(args.profile) if name != "none"]
    if args.child:  # run_alone's: only what it was given, all in this process
        args.same_process = True
        wanted = set(args.only or ())
    chosen = {name: change for name, change in VARIANTS.items() if wanted is None or name in wanted}
    if args.no_compile:
        chosen = {name: {**change, "compile": None} for name, change in chosen.items()}
    dataset = load_cifar10(train=True, size=args.train_size)
    images, labels = dataset_tensors(dataset, device)
    images = images.contiguous(memory_format=torch.channels_last)
    record = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "train_images": int(images.shape[0]),
        "process": os.getpid(),
        "set": args.set,
        "compiled": not args.no_compile,
        "variants": {},
    }
    record["setup_seconds"] = round(time.perf_counter() - began, 1)  # from main's start: CUDA, the data

    def save() -> None:  # after each variant and profile: a run stopped by a time limit keeps what it did
        record["seconds"] = round(time.perf_counter() - began, 1)
        if args.out:  # a new file, then renamed: one stopped while writing leaves the last one whole
            args.out.parent.mkdir(parents=True, exist_ok=True)
            partial = args.out.with_name(args.out.name + ".partial")
            partial.write_text(json.dumps(record, indent=2) + "\n")
            os.replace(partial, args.out)

    print(f"{record['device']}, torch {torch.__version__}, {images.shape[0]:,} images", flush=True)
    test_loader = None
    if any(change.get("test_between") or change.get("bench") for change in chosen.values()):
        test = load_cifar10(train=False, size=args.test_size)
        test_loader = DeviceLoader(*dataset_tensors(test, device), batch_size=1000)  # as the bench's

    def alone(change: dict) -> bool:  # run in the autotuner's fresh process
        return change.get("cudnn_benchmark", False) and not args.same_process

    # The order, so that a time limit stops what matters least: the profiles in this process, then the
    # variants in the order of VARIANTS, the autotuner's all at once, in a fresh process, where its first
    # one comes (after the whole step's baselines, before the NCHW and float32 variants), and
    # max-autotune last (its compile is the slowest, its time not yet known)
    last = [name for name in chosen if VARIANTS[name].get("compile") == "max-autotune"]
    for name in profiles:
        if not alone(PROFILES[name]):
            record.setdefault("profiles", {})[name] = profile_fast_path(
                images, labels, device, name, compiled=not args.no_compile
            )
            save()
    tuned_variants = [name for name, change in chosen.items() if alone(change)]
    tuned_profiles = [name for name in profiles if alone(PROFILES[name])]
    before_last = [name for name in chosen if name not in last]
    order = [name for name in before_last if name not in tuned_variants]
    if tuned_variants or tuned_profiles:  # None: the autotuner's process, where its first variant comes
        order.insert(before_last.index(tuned_variants[0]) if tuned_variants else 0, None)
    for name in [*order, *last]:
        if name is None:
            found = run_alone(args, tuned_variants, tuned_profiles)
            record["variants"].update(found["variants"])
            if found["profiles"]:
                record.setdefault("profiles", {}).update(found["profiles"])
            record["own_process_seconds"] = found["seconds"]  # its start included
            save()
        else:
            record["variants"][name] = run_variant(
                name, chosen[name], images, labels, device, args.epochs, test_loader
            )
            save()
    record["variants"] = {name: record["variants"][name] for name in chosen}  # in VARIANTS' order
    if "profiles" in record:
        record["profiles"] = {name: record["profiles"][name] for name in profiles}
    save()
    if args.out:
        print(f"wrote {args.out}")
    failed = [
        name
        for name, result in [*record.get("profiles", {}).items(), *record["variants"].items()]
        if result.get("status") == "failed"
    ]
    print(f"the probe took {record['seconds']:.0f} s", flush=True)
    if failed:  # recorded, and said in the exit status (gpu_check.py records it in run.json)
        print(f"FAILED in their own processes: {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
