"""What a later call or process reuses instead of compiling again, in layers, each using the one
below it and nothing above:

1. graph_cache: aten graph -> compiled wrapper and kernels, on disk (keyed by the aten graph AOTAutograd
   produces; symbolic graphs carry their size guards and heuristic choices).
2. dynamo_cache: Dynamo's graph -> a graph-cache entry, skipping AOTAutograd for inference graphs
   whose calling convention is trivial (`CachedInference`, the runner both paths return).
3. precompiled (with precompiled_checks): torch's AOT precompile of a whole function into one
   file, whose graphs are CachedInference runners; loading it needs neither Dynamo's trace nor a
   compile.

The backend (backend.py) sits above all three; precompile() calls back into it to compile.
"""
