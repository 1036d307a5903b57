"""The torch device a command runs on, from its ``--device`` name ("auto": CUDA where torch sees it, else the CPU).

torch is imported when a device is asked for, so importing this module stays light.
"""

from __future__ import annotations


def torch_device(name: str):
    """The ``torch.device`` of ``name`` ("auto", "cpu", "cuda", "cuda:1", ...); a ValueError for "cuda" without CUDA."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for, but torch sees no CUDA device")
    return torch.device(name)
