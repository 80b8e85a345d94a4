"""One function per capture; capture.py runs exactly one of them per process.

Each function records allocator history around a short run of the workload in
workload.py, dumps it with torch.cuda.memory._dump_snapshot, and hands the dump
to workload.finish(), which gzips it and writes the sidecar JSON. Checks on
what the dump must contain go to ctx.require (the capture fails) or ctx.expect
(a warning: the file is still usable).
"""

from __future__ import annotations

import torch

import snapshot_io
import workload as W

MARKS = ["forward", "backward", "optimizer"]


def _step_facts(ctx, obs, complete, incomplete):
    if obs is None:
        return
    ctx.require(
        obs["profiler_steps_complete"],
        "no ProfilerStep#N with both START and END in external_annotations",
    )
    ctx.expect(
        obs["profiler_steps_complete"] == complete,
        f"complete ProfilerSteps {obs['profiler_steps_complete']}, expected {complete}",
    )
    ctx.expect(
        obs["profiler_steps_incomplete"] == incomplete,
        f"incomplete ProfilerSteps {obs['profiler_steps_incomplete']}, expected {incomplete}",
    )
    steps = len(complete)
    for name in MARKS:
        got = obs["annotations"].get(name)
        ctx.expect(
            got == {"END": steps, "START": steps},
            f"record_function {name!r}: annotations {got}, expected {steps} START and END",
        )


def steps(ctx):
    """Profiler with a schedule; dumped inside it, so the last step is still open."""
    cfg, batch, n = W.ModelConfig(), 8, 6
    max_entries, stacks = W.DEFAULT_MAX_ENTRIES, W.DEFAULT_STACKS
    W.start_recording(max_entries, stacks)
    model, opt = W.build(cfg)
    x, y = W.make_batch(cfg, batch)
    with W.make_profiler() as prof:
        for _ in range(n):
            W.train_step(model, opt, x, y, marks=True)
            prof.step()
        mem = W.dump_snapshot(ctx.raw_path)
    W.stop_recording()
    _, obs = W.finish(
        ctx,
        mem=mem,
        settings=W.settings(
            cfg, model, batch, n,
            recording_started="before the model was built",
            profiler_schedule=W.PROFILER_SCHEDULE,
            profiler_activities=["CPU", "CUDA"],
            prof_step="called after every training step",
            record_function_marks=MARKS,
            dumped=f"inside the profiler context after {n} prof.step() calls: "
            f"ProfilerStep#0..#{n - 1} complete, ProfilerStep#{n} started, no END",
        ),
        max_entries=max_entries,
        stacks=stacks,
        profiler=True,
    )
    _step_facts(ctx, obs, list(range(n)), [n])


def _graphs(ctx, use_graphs: bool):
    cfg, batch, warmup, n = W.ModelConfig(), 8, 3, 20
    max_entries, stacks = W.DEFAULT_MAX_ENTRIES, W.DEFAULT_STACKS
    model, opt = W.build(cfg, capturable=True)
    x, y = W.make_batch(cfg, batch)
    # CUDA graphs forbid autocast's weight cache, so both sides run without it.
    W.warmup_on_side_stream(model, opt, x, y, warmup, autocast_cache=False)
    W.start_recording(max_entries, stacks)
    allocs_before = W.allocation_count()
    graph = None
    if use_graphs:
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)  # grads get allocated in the graph's pool
        with torch.cuda.graph(graph):
            W.train_step(model, opt, x, y, autocast_cache=False)
        for _ in range(n):
            graph.replay()
    else:
        for _ in range(n):
            W.train_step(model, opt, x, y, autocast_cache=False)
    allocs = W.allocation_count() - allocs_before
    mem = W.dump_snapshot(ctx.raw_path)
    W.stop_recording()
    _, obs = W.finish(
        ctx,
        mem=mem,
        settings=W.settings(
            cfg, model, batch, n,
            optimizer="AdamW(lr=1e-3, weight_decay=0.01, capturable=True)",
            autocast="torch.autocast('cuda', dtype=torch.bfloat16, cache_enabled=False)",
            cuda_graphs=use_graphs,
            how=(
                "torch.cuda.graph captures one whole train_step (zero_grad, forward, "
                f"backward, optimizer.step), then {n} graph.replay() calls"
                if use_graphs else f"{n} eager train_steps"
            ),
            warmup_steps=warmup,
            recording_started=(
                "after the warm-up on a side stream: weights, optimizer state and "
                "the batch predate the trace"
            ),
            allocations_while_recording=allocs,
            pair="graphs_off and graphs_on: same model, batch and steps; eager vs CUDA graph",
        ),
        max_entries=max_entries,
        stacks=stacks,
        profiler=False,
    )
    if obs is not None:
        pools = obs["segments"]["by_pool"]
        graph_pools = [p for p in pools if p != "(0, 0)"]
        if use_graphs:
            ctx.require(graph_pools, f"no segment in a graph pool (pools: {pools})")
        else:
            ctx.expect(not graph_pools, f"segments outside the default pool: {pools}")
    del graph


def graphs_off(ctx):
    """Eager training steps; the baseline of the CUDA-graph pair."""
    _graphs(ctx, use_graphs=False)


def graphs_on(ctx):
    """The same steps replayed from one torch.cuda.graph capture."""
    _graphs(ctx, use_graphs=True)


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def oom(ctx):
    """An OOM observer that dumps when a too-large allocation fails mid-step."""
    cfg, batch, n = W.ModelConfig(), 8, 3
    max_entries, stacks = W.DEFAULT_MAX_ENTRIES, W.DEFAULT_STACKS
    W.start_recording(max_entries, stacks)
    model, opt = W.build(cfg)
    x, y = W.make_batch(cfg, batch)
    for _ in range(n):
        W.train_step(model, opt, x, y)

    seen: dict = {}

    def observer(device, alloc, device_allocated, device_free):
        # Called by the caching allocator after the allocation failed and with
        # its lock released; an exception here would surface inside malloc.
        if "device_free" in seen:
            return
        try:
            seen.update(
                device=device, alloc=alloc,
                device_allocated=device_allocated, device_free=device_free,
            )
            seen["mem"] = W.memory_now()
            torch.cuda.memory._dump_snapshot(str(ctx.raw_path))
            seen["dumped"] = True
        except BaseException as e:  # noqa: BLE001 - reported below
            seen["error"] = f"{type(e).__name__}: {e}"

    torch._C._cuda_attach_out_of_memory_observer(observer)

    # The next step's forward pass is in flight (its activations are live)
    # when the oversized allocation is asked for.
    loss = W.forward_loss(model, x, y)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # so mem_get_info's free is what the allocator can get
    free_before, total = torch.cuda.mem_get_info(W.DEVICE)
    # A multiple of 2 MiB, so the request, the allocator's rounded block size
    # (the trace's oom size) and the segment size (the observer's alloc) agree.
    requested = _round_up(free_before + snapshot_io.GiB, 2 * snapshot_io.MiB)
    caught = None
    try:
        W.oversized_buffer(requested)
    except torch.cuda.OutOfMemoryError as e:
        first_line = (str(e).splitlines() or [""])[0]
        caught = f"torch.cuda.OutOfMemoryError: {first_line[:200]}"
    W.stop_recording()

    ctx.require(caught is not None, f"allocating {requested} bytes did not fail")
    ctx.require("error" not in seen, f"OOM observer raised {seen.get('error')}")
    ctx.require(seen.get("dumped"), "the OOM observer was not called or did not dump")
    if seen.get("dumped"):
        mem = seen["mem"]
    else:  # still leave a file to look at; the capture is marked failed above
        mem = W.dump_snapshot(ctx.raw_path)
    oom_facts = {
        "requested_bytes": requested,
        "device_free": seen.get("device_free"),
        # The observer's other arguments, as the caching allocator passes them:
        # alloc is the segment size it tried to cudaMalloc; the third argument
        # (named device_allocated in the Python binding) is the device's total
        # memory, or the limit set by set_per_process_memory_fraction.
        "observer_alloc_bytes": seen.get("alloc"),
        "observer_device_allocated_arg": seen.get("device_allocated"),
        "mem_get_info_free_before_request": free_before,
        "mem_get_info_total": total,
    }
    _, obs = W.finish(
        ctx,
        mem=mem,
        settings=W.settings(
            cfg, model, batch, n,
            recording_started="before the model was built",
            observer="torch._C._cuda_attach_out_of_memory_observer; the callback "
            "reads memory_allocated/reserved, then calls _dump_snapshot",
            oom_request="torch.empty(requested_bytes, dtype=uint8) after "
            f"{n} training steps, with the next step's forward activations live; "
            "requested_bytes = free (after empty_cache) + 1 GiB, rounded up to 2 MiB",
            exception_caught=caught,
        ),
        max_entries=max_entries,
        stacks=stacks,
        profiler=False,
        oom=oom_facts,
    )
    if obs is not None:
        entries = obs["oom_entries"]
        ctx.require(entries, "no 'oom' action in the device trace")
        if entries and seen.get("dumped"):
            ctx.expect(
                entries[-1]["device_free"] == seen["device_free"],
                f"trace oom device_free {entries[-1]['device_free']} != observer's "
                f"{seen['device_free']}",
            )
            ctx.expect(
                entries[-1]["size"] == requested,
                f"trace oom size {entries[-1]['size']} != requested {requested}",
            )
    del loss


def expandable(ctx):
    """expandable_segments:True (set in the environment by capture.py before torch starts CUDA)."""
    cfg, batch, n = W.ModelConfig(), 8, 3
    max_entries, stacks = W.DEFAULT_MAX_ENTRIES, W.DEFAULT_STACKS
    W.start_recording(max_entries, stacks)
    model, opt = W.build(cfg)
    x, y = W.make_batch(cfg, batch)
    for _ in range(n):
        W.train_step(model, opt, x, y)
    torch.cuda.empty_cache()  # unmaps the free ends of the segments
    x2, y2 = W.make_batch(cfg, 2 * batch, seed=W.SEED + 1)
    for _ in range(n):  # a larger batch maps more of the segments again
        W.train_step(model, opt, x2, y2)
    mem = W.dump_snapshot(ctx.raw_path)
    W.stop_recording()
    _, obs = W.finish(
        ctx,
        mem=mem,
        settings=W.settings(
            cfg, model, batch, 2 * n,
            recording_started="before the model was built",
            how=f"{n} steps at batch {batch}, torch.cuda.empty_cache(), "
            f"{n} steps at batch {2 * batch}",
        ),
        max_entries=max_entries,
        stacks=stacks,
        profiler=False,
    )
    if obs is not None:
        conf = obs["allocator_settings"] or {}
        ctx.require(
            conf.get("expandable_segments") is True,
            f"allocator_settings.expandable_segments is {conf.get('expandable_segments')!r}; "
            "PYTORCH_CUDA_ALLOC_CONF did not take effect",
        )
        ctx.require(obs["segments"]["expandable"] > 0, "no segment has is_expandable")
        for action in ("segment_map", "segment_unmap"):
            ctx.expect(action in obs["actions"], f"no {action} in the trace")


def wrapped(ctx):
    """max_entries small enough that the ring buffer wraps: only the newest entries remain."""
    cfg, batch = W.ModelConfig(), 8
    max_entries, stacks = 2000, W.DEFAULT_STACKS
    W.start_recording(max_entries, stacks)
    allocs_before = W.allocation_count()
    model, opt = W.build(cfg)
    x, y = W.make_batch(cfg, batch)
    # Every allocation adds at least one entry, so once the allocations alone
    # reach max_entries the buffer has wrapped; one more step to be sure.
    n = 0
    while n < 3 or (W.allocation_count() - allocs_before < max_entries and n < 50):
        W.train_step(model, opt, x, y)
        n += 1
    W.train_step(model, opt, x, y)
    n += 1
    allocs = W.allocation_count() - allocs_before
    mem = W.dump_snapshot(ctx.raw_path)
    W.stop_recording()
    _, obs = W.finish(
        ctx,
        mem=mem,
        settings=W.settings(
            cfg, model, batch, n,
            recording_started="before the model was built (the oldest entries, "
            "including the model's, have been overwritten)",
            allocations_while_recording=allocs,
        ),
        max_entries=max_entries,
        stacks=stacks,
        profiler=False,
    )
    if obs is not None:
        kept = obs["trace_entries"].get(str(W.DEVICE), 0)
        ctx.require(kept == max_entries, f"trace kept {kept} entries, expected {max_entries}")


def _stacks(ctx, stacks: str):
    cfg, batch, n = W.ModelConfig(), 8, 3
    max_entries = W.DEFAULT_MAX_ENTRIES
    W.start_recording(max_entries, stacks)
    model, opt = W.build(cfg)
    x, y = W.make_batch(cfg, batch)
    for _ in range(n):
        W.train_step(model, opt, x, y, marks=True)
    mem = W.dump_snapshot(ctx.raw_path)
    W.stop_recording()
    _, obs = W.finish(
        ctx,
        mem=mem,
        settings=W.settings(
            cfg, model, batch, n,
            recording_started="before the model was built",
            record_function_marks=MARKS,
            pair="python_stacks and all_stacks: same workload, stacks='python' vs 'all'",
        ),
        max_entries=max_entries,
        stacks=stacks,
        profiler=False,
    )
    if obs is not None:
        frames = obs["frames"]
        if stacks == "all":
            ctx.require(frames["other"] > 0, f"no C++ frames with stacks='all': {frames}")
        else:
            ctx.expect(frames["other"] == 0, f"non-Python frames with stacks='python': {frames}")


def python_stacks(ctx):
    """stacks='python': Python frames only."""
    _stacks(ctx, "python")


def all_stacks(ctx):
    """stacks='all': C++ frames interleaved with the Python ones."""
    _stacks(ctx, "all")


def _ab(ctx, batch: int):
    cfg, n = W.ModelConfig(), 4
    max_entries, stacks = W.DEFAULT_MAX_ENTRIES, W.DEFAULT_STACKS
    W.start_recording(max_entries, stacks)
    model, opt = W.build(cfg)
    x, y = W.make_batch(cfg, batch)
    with W.make_profiler() as prof:
        for i in range(n):
            W.train_step(model, opt, x, y, marks=True)
            if i + 1 < n:
                prof.step()
    mem = W.dump_snapshot(ctx.raw_path)
    W.stop_recording()
    _, obs = W.finish(
        ctx,
        mem=mem,
        settings=W.settings(
            cfg, model, batch, n,
            recording_started="before the model was built",
            profiler_schedule=W.PROFILER_SCHEDULE,
            profiler_activities=["CPU", "CUDA"],
            prof_step="called between training steps; the profiler context closes the last",
            record_function_marks=MARKS,
            peak_allocated=torch.cuda.max_memory_allocated(W.DEVICE),
            pair="ab_pair_a and ab_pair_b differ only in batch_size (8 vs 16): "
            "B's activations, and so its per-step peaks, are larger",
        ),
        max_entries=max_entries,
        stacks=stacks,
        profiler=True,
    )
    _step_facts(ctx, obs, list(range(n)), [])


def ab_pair_a(ctx):
    """Side A of the compare pair: batch 8."""
    _ab(ctx, 8)


def ab_pair_b(ctx):
    """Side B of the compare pair: batch 16, otherwise identical to A."""
    _ab(ctx, 16)
