"""ccpool: one bounded, deduplicating compile pool per node.

`ccpool run -- <launcher>` hooks every Python process of a job at start. A
script that cannot wrap its launcher calls `ccpool.enable()` first thing."""
__all__ = ["__version__"]
__version__ = "0.1.0"
