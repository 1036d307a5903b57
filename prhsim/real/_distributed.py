"""Data-parallel training under ``torchrun``: the process group, and SIGReg over the global batch.

``torchrun`` starts one process per device and sets ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``;
:func:`join` joins them into one group (NCCL on CUDA, gloo on CPU), each process on the device
``cuda:LOCAL_RANK``. Without those variables a run is one process and nothing here communicates.

SIGReg's statistic is a function of the batch means ``(C, S)`` of ``cos(t x)`` and ``sin(t x)``
(docs/theory.md §7). Over the global batch they are the mean of the processes' local means (equal
local batches), so :func:`global_mean` is the reduce hook of SIGReg (that of :func:`prhsim.objectives.lejepa_loss`
and of ``sigreg_torch``, which training uses): its
value is the all-reduced mean, and its gradient is the identity, because the gradient at the
reduced means is the same on every process. Each process then holds ``world_size`` times its share
of the global gradient, and DistributedDataParallel, which averages parameter gradients over the
processes, gets exactly the global batch's gradient. The two ways public implementations got this
wrong are both caught by the tests: an all-reduce autograd does not see (the right value, but
``1/world_size`` of the gradient, which silently divides λ by the number of processes), and a
per-process statistic (the regulariser's strength then depends on the number of processes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Processes:
    """This process's place among the training processes."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """The process that writes the run folder and prints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def launched() -> Processes:
    """The place ``torchrun`` gave this process (from ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), or one process."""
    try:
        return Processes(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                         int(os.environ.get("LOCAL_RANK", 0)))
    except ValueError:
        raise ValueError("RANK, WORLD_SIZE and LOCAL_RANK must be integers (as torchrun sets them)") from None


def join(device: torch.device) -> bool:
    """Join the process group torchrun set up (NCCL for CUDA, gloo for CPU); whether this call joined it
    (one process, or a group already joined, joins nothing)."""
    place = launched()
    if not place.distributed or dist.is_initialized():
        return False
    if device.type == "cuda":
        torch.cuda.set_device(place.local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", place.local_rank))
    else:
        dist.init_process_group("gloo")
    return True


def leave() -> None:
    """Leave the process group this process joined."""
    if dist.is_initialized():
        dist.destroy_process_group()


def global_mean(cs: torch.Tensor) -> torch.Tensor:
    """The mean of ``cs`` over the processes, with the identity as its gradient (module docstring)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return cs
    total = cs.detach().clone()
    dist.all_reduce(total)
    return cs + (total / dist.get_world_size() - cs).detach()


def all_sum(value: torch.Tensor) -> torch.Tensor:
    """The sum of a (detached) tensor over the processes; the tensor itself for one process."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return value
    total = value.detach().clone()
    dist.all_reduce(total)
    return total


def all_min(value: torch.Tensor) -> torch.Tensor:
    """The minimum of a (detached) tensor over the processes; the tensor itself for one process."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return value
    low = value.detach().clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return low


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()
