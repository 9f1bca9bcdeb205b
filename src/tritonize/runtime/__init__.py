"""Runtime: what generated wrappers import. Never imports the compiler (lower/, schedule/, codegen/)."""
