"""Choosing a launch config by measurement: compile the candidates, drop the ones that spill,
add smaller-RBLOCK variants where registers limit occupancy, time the rest, keep the fastest,
and in max-autotune mode refine it by coordinate descent.

The two effects, compiling and timing, come in as functions so the selection logic runs (and is
tested) without a GPU:
* compile_many(configs) -> list of Variant or Exception, in the order given;
* time_variants(variants) -> seconds for each (the launcher times them together, taking turns
  run by run, on the real arguments with the ones the kernel writes protected:
  benchmarking.WrittenArgs). Whatever is compared is timed in one such call: the candidates
  together, and in coordinate descent the incumbent again with its neighbors.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Callable

from .heuristics import DeviceInfo, KernelShape, LaunchConfig, halved_rblock, is_max_autotune, neighbors

log = logging.getLogger("tritonize.autotune")

SPILL_THRESHOLD = 0  # a config with more spilled registers than this is dropped
MIN_GAIN = 0.01  # coordinate descent moves only for a gain larger than 1%
MAX_DESCENT_ROUNDS = 8


@dataclasses.dataclass
class Variant:
    """One config compiled: how to launch it and what the compiler reported."""

    config: LaunchConfig
    launch: Callable  # launch(*args), unguarded (for timing)
    n_regs: int = 0
    n_spills: int = 0
    guarded: Callable | None = None  # the fast path kept for later calls


class NoUsableConfig(RuntimeError):
    pass


@dataclasses.dataclass
class Selection:
    best: Variant
    timings: dict  # LaunchConfig -> seconds (inf for a failed run)
    compiled: int  # configs compiled, failures included
    reason: str  # "only one config", "timed", ...


def select(kernel_name: str, shape: KernelShape, configs: list[LaunchConfig], compile_many: Callable,
           time_variants: Callable, mode: str, device: DeviceInfo) -> Selection:
    """The fastest usable config of `configs` (plus register-pressure variants, plus coordinate
    descent in max-autotune mode)."""
    variants = _compile(kernel_name, configs, compile_many)
    compiled = len(configs)
    variants = drop_spilling(kernel_name, variants)
    extra = _rblock_variants(shape, variants, device)
    if extra:
        variants += drop_spilling(kernel_name, _compile(kernel_name, extra, compile_many, required=False))
        compiled += len(extra)
    if len(variants) == 1 and not is_max_autotune(mode):
        return Selection(variants[0], {}, compiled, "only one config")
    timings: dict = {}
    best = _time_all(kernel_name, variants, time_variants, timings)
    if is_max_autotune(mode):
        best, extra_compiled = coordinate_descent(kernel_name, shape, best, timings, compile_many, time_variants)
        compiled += extra_compiled
    log.debug("tritonize autotune %s: %s (%.2f us) of %d timed", kernel_name, best.config,
              timings.get(best.config, 0) * 1e6, len(timings))
    return Selection(best, timings, compiled, "timed")


def _compile(kernel_name, configs, compile_many, required=True) -> list[Variant]:
    results = compile_many(configs)
    variants, errors = [], []
    for config, result in zip(configs, results):
        if isinstance(result, Exception):
            log.debug("tritonize autotune %s: %s does not compile: %s", kernel_name, config, result)
            errors.append(f"{config}: {type(result).__name__}: {result}")
        else:
            variants.append(result)
    if required and not variants:
        raise NoUsableConfig(f"kernel {kernel_name}: no launch config compiled:\n  " + "\n  ".join(errors))
    return variants


def drop_spilling(kernel_name: str, variants: list[Variant]) -> list[Variant]:
    """Variants without register spills; if every one spills, the ones that spill least."""
    clean = [v for v in variants if v.n_spills <= SPILL_THRESHOLD]
    if clean or not variants:
        for v in variants:
            if v.n_spills > SPILL_THRESHOLD:
                log.debug("tritonize autotune %s: dropping %s (%d spills)", kernel_name, v.config, v.n_spills)
        return clean
    least = min(v.n_spills for v in variants)
    return [v for v in variants if v.n_spills == least]


def _rblock_variants(shape: KernelShape, variants: list[Variant], device: DeviceInfo) -> list[LaunchConfig]:
    known = {v.config for v in variants}
    extra = []
    for v in variants:
        halved = halved_rblock(shape, v.config, v.n_regs, device)
        if halved is not None and halved not in known and halved not in extra:
            extra.append(halved)
    return extra


def _time_all(kernel_name, variants, time_variants, timings) -> Variant:
    """Time `variants` together; the fastest (the first of equals) is returned."""
    for variant, seconds in zip(variants, _time_together(kernel_name, variants, time_variants)):
        timings[variant.config] = seconds
    return min(variants, key=lambda v: timings[v.config])


def _time_together(kernel_name, variants, time_variants) -> list[float]:
    try:
        return [float(s) for s in time_variants(variants)]
    except Exception:  # one of them fails at run time (resources): find it, time the others alone
        return [_time_one(kernel_name, v, time_variants) for v in variants]


def _time_one(kernel_name, variant, time_variants) -> float:
    try:
        return float(time_variants([variant])[0])
    except Exception as err:  # a config that fails at run time (resources) is not chosen
        log.debug("tritonize autotune %s: %s fails to run: %s", kernel_name, variant.config, err)
        return float("inf")


def coordinate_descent(kernel_name, shape, best: Variant, timings: dict, compile_many, time_variants):
    """Move to the best neighbor (a block size, num_warps or num_stages doubled or halved) while
    that gains more than MIN_GAIN; each round compiles the untried neighbors together and times
    them together with the incumbent (whose earlier timing may come from a slower moment)."""
    compiled = 0
    tried_configs = set(timings)
    for _ in range(MAX_DESCENT_ROUNDS):
        steps = [c for c in neighbors(shape, best.config) if c not in tried_configs]
        if not steps:
            break
        compiled += len(steps)
        tried_configs.update(steps)
        tried = drop_spilling(kernel_name, _compile(kernel_name, steps, compile_many, required=False))
        for config in steps:
            timings.setdefault(config, float("inf"))  # failed or spilling: never retried
        if not tried:
            break
        fastest = _time_all(kernel_name, [best] + tried, time_variants, timings)
        if fastest is best or timings[fastest.config] >= timings[best.config] * (1 - MIN_GAIN):
            break
        best = fastest
    return best, compiled
