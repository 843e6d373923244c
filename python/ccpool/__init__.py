"""ccpool: one bounded, deduplicating compile pool per node.

`ccpool run -- <launcher>` hooks every Python process of a job at start. A
script whose launcher cannot be wrapped calls `ccpool.enable()` first thing,
before `import torch` (docs/python.md). `python -m ccpool ARGS` is the CLI."""
from ._enable import Enabled, EnableError, enable

__all__ = ["Enabled", "EnableError", "enable", "__version__"]
__version__ = "0.1.0"
