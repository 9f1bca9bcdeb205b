"""Lowering: aten FX graph -> GraphIR (see graph.lower_graph)."""
