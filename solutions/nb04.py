"""Reference solutions for the exercises of ``04_data_parallel`` (try them yourself first)."""

import torch
from torch import nn


def use_all_gpus(model):
    """``model`` ready for every GPU here: wrapped only when there are several, on the first GPU."""
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)  # every visible GPU; it copies the model from cuda:0
    if torch.cuda.is_available():
        model = model.to("cuda")  # the first GPU, device_ids[0]; a module moves in place
    return model


def plain_state_dict(wrapped):
    return wrapped.module.state_dict()


def visible_gpus_env(gpu_ids):
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in gpu_ids)}
