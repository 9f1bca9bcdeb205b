"""The loop-level IR: value expressions (expr), index arithmetic (symbols), buffers and values (nodes)."""
