"""CUDA graphs at compile time (mode="reduce-overhead"): what is captured and how (plan.py), and
where padding to size buckets is legal (padding.py, padding_rules.py). The call-time side is
runtime/cuda_graphs.py and runtime/cuda_graph_buckets.py."""
