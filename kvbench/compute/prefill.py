"""Measure a prefill profile: build a model's stack, time it over prompt lengths, fit T(n), keep the points.

On CUDA the whole stack is built when the weights fit in half the free memory (else the most layers that do,
scaled); on the CPU a few layers are built and scaled per layer kind. The profile records which.
"""

from __future__ import annotations

import datetime as _dt
import platform
from dataclasses import dataclass

import numpy as np

from kvbench import __version__
from kvbench.compute.fit import fit_quadratic
from kvbench.compute.profile import ComputeProfile
from kvbench.compute.stack import (TORCH_DTYPES, LayerPlan, Stack, layer_kinds, layer_param_counts, plan_layers,
                                   require_torch)
from kvbench.compute.timing import scaled_totals, time_stages
from kvbench.errors import DependencyError, KvbenchError, SpecError
from kvbench.spec.models import ModelSpec

CPU_DEFAULT_LAYERS = 2
DEFAULT_LENGTHS = {"cpu": (128, 256, 512, 1024), "cuda": (1024, 2048, 4096, 8192, 16384)}
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class LengthResult:
    """One prompt length: the built stack's time and the full model's (scaled) time, per repetition."""

    tokens: int
    stack_seconds: tuple[float, ...]
    model_seconds: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return float(np.median(self.model_seconds))


def validate_lengths(lengths) -> tuple[int, ...]:
    """Prompt lengths: integers > 0, at least two distinct (the fit needs a slope)."""
    out = []
    for x in lengths:
        try:
            v = int(x)
        except (TypeError, ValueError):
            raise SpecError(f"--lengths: {x!r} is not an integer", "give token counts, e.g. 512,1024,2048") from None
        if v <= 0 or str(x).strip() not in (str(v), f"{v}.0"):
            raise SpecError(f"--lengths: every length must be an integer > 0, got {x!r}",
                            "give token counts, e.g. 512,1024,2048")
        out.append(v)
    if len(set(out)) < 2:
        raise SpecError("--lengths: need at least two distinct lengths to fit T(n)", "e.g. --lengths 512,1024,2048")
    return tuple(sorted(set(out)))


def resolve_device(torch, device: str | None) -> str:
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DependencyError("--device cuda: torch sees no CUDA device (CPU build or no GPU)",
                              "use --device cpu, or install a CUDA build of torch on a GPU machine")
    if device.split(":")[0] not in ("cpu", "cuda"):
        raise SpecError(f"--device must be cpu or cuda[:N], not {device!r}", "use --device cpu or --device cuda")
    return device


def device_name(torch, device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    threads = torch.get_num_threads()
    return f"cpu: {model} ({threads} thread{'s' if threads != 1 else ''})"


def versions(torch) -> dict:
    v = {"kvbench": __version__, "torch": torch.__version__, "python": platform.python_version()}
    if torch.version.cuda:
        v["cuda"] = torch.version.cuda
    return v


def choose_layers(torch, spec: ModelSpec, device: str, dtype: str, layers: int | None) -> LayerPlan:
    """The layers to build: as asked, else all on CUDA when they fit in half the free memory, else a few."""
    params = layer_param_counts(spec)
    full = plan_layers(spec, None)
    per_layer = max(params["dense"], params["moe"]) * DTYPE_BYTES[dtype]
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
    else:
        import psutil
        free = psutil.virtual_memory().available
    budget = 0.5 * free - params["embedding"] * DTYPE_BYTES[dtype]
    if layers is None:
        if device.startswith("cuda"):
            fit = int(budget // per_layer)
            kinds = len(layer_kinds(spec, full)[1])      # dense/MoE x full/sliding: one layer of each at least
            layers = None if fit >= spec.layers else max(kinds, fit)
        else:
            layers = CPU_DEFAULT_LAYERS
    plan = plan_layers(spec, layers)
    if plan.layers_measured * per_layer > budget:
        raise SpecError(f"model {spec.name!r}: {plan.layers_measured} layers need "
                        f"{plan.layers_measured * per_layer / 2**30:.1f} GiB of weights, more than half the free "
                        f"memory on {device}", "give fewer --layers (times are scaled per layer)")
    return plan


@dataclass(frozen=True)
class PrefillSetup:
    """Validated inputs of a prefill measurement (everything checked before anything is built or written)."""

    spec: ModelSpec
    lengths: tuple[int, ...]
    device: str
    dtype: str
    plan: LayerPlan
    warmup: int
    reps: int
    threads: int | None
    seed: int
    name: str
    measure_copy: bool

    def to_dict(self) -> dict:
        return {"model": self.spec.name, "lengths": list(self.lengths), "device": self.device, "dtype": self.dtype,
                "layers_measured": self.plan.layers_measured, "layers_total": self.plan.layers_total,
                "warmup": self.warmup, "reps": self.reps, "threads": self.threads, "seed": self.seed,
                "name": self.name, "copy": self.measure_copy}


def prepare_prefill(spec: ModelSpec, lengths, *, device: str | None = None, dtype: str | None = None,
                    layers: int | None = None, warmup: int | None = None, reps: int | None = None,
                    seed: int = 0, name: str | None = None, measure_copy: bool = True,
                    threads: int | None = None) -> PrefillSetup:
    """Check every input and choose defaults (device, dtype, layers, repetitions); raises before any work."""
    lengths = validate_lengths(lengths)
    torch = require_torch()
    device = resolve_device(torch, device)
    cuda = device.startswith("cuda")
    dtype = dtype or ("bf16" if cuda else "fp32")
    if dtype not in TORCH_DTYPES:
        raise SpecError(f"--dtype must be one of {', '.join(TORCH_DTYPES)}, not {dtype!r}", "e.g. --dtype bf16")
    warmup = (3 if cuda else 1) if warmup is None else warmup
    reps = (10 if cuda else 3) if reps is None else reps
    if warmup < 0 or reps < 1:
        raise SpecError("--warmup must be >= 0 and --reps >= 1", "e.g. --warmup 1 --reps 3")
    if threads is not None and threads < 1:
        raise SpecError(f"--threads must be >= 1, got {threads}", "e.g. --threads 1")
    plan = choose_layers(torch, spec, device, dtype, layers)
    return PrefillSetup(spec, lengths, device, dtype, plan, warmup, reps, threads, seed,
                        name or f"{spec.name}-{device.split(':')[0]}-measured", measure_copy)


def run_prefill(setup: PrefillSetup, progress=None) -> tuple[ComputeProfile, list[LengthResult]]:
    """Build the stack, time every length (``progress(result)`` after each), fit, and make the profile."""
    torch = require_torch()
    spec, plan, device = setup.spec, setup.plan, setup.device
    cuda = device.startswith("cuda")
    if setup.threads is not None:
        torch.set_num_threads(setup.threads)  # CPU intra-op threads; on a busy machine 1 is far steadier
    stack = Stack(spec, plan, device=device, dtype=setup.dtype, seed=setup.seed)
    totals, window = stack.totals, stack.window
    results = []
    try:
        for n in setup.lengths:
            stages = time_stages(stack, n, warmup=setup.warmup, reps=setup.reps)
            model_s = scaled_totals(stages, stack.kinds, totals)
            results.append(LengthResult(n, tuple(stages.sum(axis=1).tolist()), tuple(model_s.tolist())))
            if progress:
                progress(results[-1])
    except torch.cuda.OutOfMemoryError:
        raise KvbenchError(f"out of GPU memory at {n} tokens with {plan.layers_measured} layers",
                           "give shorter --lengths or fewer --layers") from None
    finally:
        del stack
        if cuda:
            torch.cuda.empty_cache()
    fit = fit_quadratic([r.tokens for r in results], [r.median_s for r in results])
    if fit.b == 0 and fit.c == 0:
        raise KvbenchError(f"prefill time did not grow with length over {', '.join(map(str, setup.lengths))} "
                           "tokens (fixed overhead dominates, or the machine was busy)",
                           "measure longer --lengths or more --reps")
    copy = None
    if cuda and setup.measure_copy:
        from kvbench.compute.copy import measure_h2d
        copy = measure_h2d(torch, device)
    how = (f"{plan.layers_measured} of {plan.layers_total} layers built ({plan.dense_measured} dense, "
           f"{plan.moe_measured} MoE), per-layer times scaled to the full stack" if plan.scaled
           else f"all {plan.layers_total} layers built")
    if window:
        how += (f"; {sum(v for k, v in totals.items() if k.endswith('+sliding'))} sliding-window layers "
                f"attend to {window} tokens")
    profile = ComputeProfile(
        name=setup.name, kind="measured", model=spec.name, device=device_name(torch, device), dtype=setup.dtype,
        fit=fit, reference_tokens=max(setup.lengths), source="kvbench prefill (random weights, batch 1)",
        notes=f"{how}; median of {setup.reps} repetitions after {setup.warmup} warm-up; "
              f"{'CUDA events' if cuda else 'perf_counter'}",
        points_tokens=tuple(r.tokens for r in results), points_seconds=tuple(r.median_s for r in results),
        points_seconds_min=tuple(min(r.model_seconds) for r in results),
        points_seconds_max=tuple(max(r.model_seconds) for r in results), repetitions=setup.reps,
        layers_total=plan.layers_total, layers_measured=plan.layers_measured, scaled=plan.scaled,
        versions=versions(torch), created=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        copy=copy)
    return profile, results


def measure_prefill(spec: ModelSpec, lengths, *, progress=None, **options) -> tuple[ComputeProfile, list[LengthResult]]:
    """Validate, then time prefill of ``spec`` at each length: a measured profile and the raw results."""
    return run_prefill(prepare_prefill(spec, lengths, **options), progress)


__all__ = ["measure_prefill", "prepare_prefill", "run_prefill", "PrefillSetup", "validate_lengths", "LengthResult",
           "DEFAULT_LENGTHS"]
