"""tritonize.profile: where a compiled function's time goes, kernel by kernel (issue 24).

    prof = tritonize.profile(fn, *args)      # compile afresh, run, count; on a GPU also time
    print(prof)                              # one row per kernel or library call
    prof.save_html("profile.html")           # roofline chart, sortable table, the sources
    python -m tritonize.profile script.py [--html out.html] [script's arguments]

Each generated kernel's and library call's bytes read and written and floating-point operations
come from the IR at the graph's example sizes (codegen/traffic.py), per call of each graph; on a
GPU, torch.profiler times every kernel (timing.py), and the device's measured roofs (roofs.py)
label each row memory- or compute-bound and flag those far below their roof (rows.py). On the
CPU the report has no times.

This package is also the function: `tritonize.profile(fn, *args)` calls the module. `python -m
tritonize.profile` needs a module of that name, and `tritonize.profile(...)` is the documented
call, so the module's class is a ModuleType whose instances are callable (`_CallableModule`).
"""
from __future__ import annotations

import sys
import types

from .rows import KernelRow, Profile, Roofs, merge_profiles, profile_from_artifacts
from .session import profile_function, profile_script

__all__ = ["KernelRow", "Profile", "Roofs", "merge_profiles", "profile_from_artifacts", "profile_function", "profile_script"]


class _CallableModule(types.ModuleType):
    def __call__(self, fn, *args, **kwargs) -> Profile:
        """tritonize.profile(fn, *args, options=None, dynamic=None, profile_runs=10, **kwargs): see
        session.profile_function."""
        return profile_function(fn, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
