"""Scheduling: GraphIR -> ordered, fused kernel groups and extern calls."""
