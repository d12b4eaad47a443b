"""Pure renderers: typed result records in, rich tables / markdown / HTML out. No I/O."""
