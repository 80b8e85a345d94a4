"""The shared workload of the capture scripts, and the recording helpers.

A small decoder-style transformer (input projection, learned positions, a few
pre-norm blocks with causal scaled-dot-product attention and a GELU MLP, a
classification head over every position), trained with AdamW under
torch.autocast(bfloat16). It is small enough that a step takes milliseconds on
an H100 and a few steps of allocator history stay well under a megabyte
compressed, and real enough that its allocations look like training: weights,
optimizer state, activations saved for backward, gradients, foreach temporaries.

The model code lives in this file on purpose: its lines are the user frames
that memsnap's source attribution should name (torch's own frames are filtered
out as internal).

Importing this module imports torch; capture.py does that only after checking
that PyTorch with CUDA is present.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import platform
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

import snapshot_io

DEVICE = 0
# Enough for every non-wrapping capture here to keep its whole history
# (they record a few thousand entries per step); small enough that a runaway
# capture cannot produce a huge file.
DEFAULT_MAX_ENTRIES = 100_000
# Python frames only by default: C++ frames multiply the file size, and the
# all_stacks capture covers them.
DEFAULT_STACKS = "python"
SEED = 0

ENV_KEYS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "TORCH_SYMBOLIZE_MODE")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    d_in: int = 64
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = 1024
    n_classes: int = 4096
    seq_len: int = 128


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        k = k.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        v = v.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.fc2 = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h = F.gelu(h)
        return self.fc2(h)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class TinyTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.inp = nn.Linear(cfg.d_in, cfg.d_model)
        self.pos = nn.Parameter(torch.randn(cfg.seq_len, cfg.d_model) * 0.02)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x) + self.pos[: x.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))


def cuda_device() -> torch.device:
    return torch.device("cuda", DEVICE)


def build(cfg: ModelConfig, *, capturable: bool = False):
    """Model on the GPU and its AdamW optimizer (state is created on the first step)."""
    torch.manual_seed(SEED)
    model = TinyTransformer(cfg).to(cuda_device())
    opt = torch.optim.AdamW(
        model.parameters(), lr=1e-3, weight_decay=0.01, capturable=capturable
    )
    return model, opt


def make_batch(cfg: ModelConfig, batch_size: int, seed: int = SEED):
    g = torch.Generator(device=cuda_device())
    g.manual_seed(seed)
    x = torch.randn(
        batch_size, cfg.seq_len, cfg.d_in, device=cuda_device(), generator=g
    )
    y = torch.randint(
        0, cfg.n_classes, (batch_size, cfg.seq_len), device=cuda_device(), generator=g
    )
    return x, y


def oversized_buffer(nbytes: int) -> torch.Tensor:
    """The allocation the oom capture makes fail (the user frame of the OOM)."""
    return torch.empty(nbytes, dtype=torch.uint8, device=cuda_device())


def mark(name: str, enabled: bool):
    """A record_function range (an external_annotations START/END pair)."""
    if enabled:
        return torch.profiler.record_function(name)
    return contextlib.nullcontext()


def forward_loss(model, x, y, *, autocast_cache: bool = True) -> torch.Tensor:
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=autocast_cache):
        logits = model(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def train_step(model, opt, x, y, *, marks: bool = False, autocast_cache: bool = True):
    """One AdamW step; no host synchronization, so it is also CUDA-graph capturable."""
    opt.zero_grad(set_to_none=True)
    with mark("forward", marks):
        loss = forward_loss(model, x, y, autocast_cache=autocast_cache)
    with mark("backward", marks):
        loss.backward()
    with mark("optimizer", marks):
        opt.step()
    return loss.detach()


def warmup_on_side_stream(model, opt, x, y, steps: int, **step_kwargs) -> None:
    """The warm-up that torch.cuda.graph capture needs (as in PyTorch's CUDA graphs docs)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(steps):
            train_step(model, opt, x, y, **step_kwargs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


PROFILER_SCHEDULE = {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}


def make_profiler():
    """torch.profiler with a schedule; prof.step() opens ProfilerStep#N ranges."""
    from torch.profiler import ProfilerActivity, profile, schedule

    return profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(**PROFILER_SCHEDULE),
        on_trace_ready=None,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
    )


def start_recording(max_entries: int, stacks: str = DEFAULT_STACKS) -> None:
    torch.cuda.memory._record_memory_history(
        enabled="all", context="all", stacks=stacks, max_entries=max_entries
    )


def stop_recording() -> None:
    torch.cuda.memory._record_memory_history(enabled=None)


def memory_now() -> dict[str, int]:
    return {
        "allocated": torch.cuda.memory_allocated(DEVICE),
        "reserved": torch.cuda.memory_reserved(DEVICE),
    }


def dump_snapshot(raw_path: Path) -> dict[str, int]:
    """Synchronizes, reads allocated/reserved, and dumps with nothing allocated in between."""
    torch.cuda.synchronize(DEVICE)
    mem = memory_now()
    torch.cuda.memory._dump_snapshot(str(raw_path))
    return mem


def allocation_count() -> int:
    """Allocations made so far by the caching allocator on DEVICE (all pools)."""
    return int(torch.cuda.memory_stats(DEVICE).get("allocation.all.allocated", 0))


def settings(
    cfg: ModelConfig, model: nn.Module, batch_size: int, steps: int, **extra: Any
) -> dict:
    """The part of the sidecar's settings every capture shares, then its own."""
    return {
        "model": dataclasses.asdict(cfg),
        "model_parameters": sum(p.numel() for p in model.parameters()),
        "batch_size": batch_size,
        "steps": steps,
        "optimizer": "AdamW(lr=1e-3, weight_decay=0.01)",
        "autocast": "torch.autocast('cuda', dtype=torch.bfloat16)",
        "seed": SEED,
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        **extra,
    }


def finish(
    ctx,
    *,
    mem: dict[str, int],
    settings: dict,
    max_entries: int,
    stacks: str,
    profiler: bool,
    oom: dict | None = None,
) -> tuple[dict, dict | None]:
    """Reads facts back from the raw dump, gzips it, writes the sidecar.

    Returns (sidecar, observed); observed is None when the dump could not be
    loaded as plain data (that is recorded as a failure on ctx).
    """
    raw: Path = ctx.raw_path
    observed: dict | None
    try:
        observed = snapshot_io.summarize(
            snapshot_io.load_snapshot(raw), device=DEVICE, max_entries=max_entries
        )
    except (pickle.UnpicklingError, ValueError, EOFError) as e:
        observed = None
        ctx.require(False, f"dump does not load as plain data: {e}")
    protocol = snapshot_io.pickle_protocol(raw)
    size = snapshot_io.gzip_file(raw, ctx.gz_path)
    raw.unlink()

    settings = dict(settings, observed=observed)
    steps = None
    if profiler and observed is not None:
        steps = len(observed["profiler_steps_complete"])
    sidecar = {
        "capture": ctx.name,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
        "gpu_name": torch.cuda.get_device_name(DEVICE),
        "settings": settings,
        "pickle_protocol": protocol,
        "memory_allocated_at_dump": mem["allocated"],
        "memory_reserved_at_dump": mem["reserved"],
        "device": DEVICE,
        "profiler_steps": steps,
        "oom": oom,
        "max_entries": max_entries,
        "stacks": stacks,
    }
    snapshot_io.write_json(ctx.json_path, sidecar)

    ctx.expect(
        size <= snapshot_io.SIZE_BUDGET_BYTES,
        f"{ctx.gz_path.name} is {size / snapshot_io.MiB:.1f} MiB, over the 5 MiB budget",
    )
    if observed is not None:
        seg = observed["segments"]
        ctx.expect(
            seg["allocated_size"] == mem["allocated"],
            f"segments allocated_size {seg['allocated_size']} != "
            f"memory_allocated() {mem['allocated']} at dump",
        )
        ctx.expect(
            seg["total_size"] == mem["reserved"],
            f"segments total_size {seg['total_size']} != "
            f"memory_reserved() {mem['reserved']} at dump",
        )
    return sidecar, observed
