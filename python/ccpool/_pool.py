"""Placeholder until the node worker pool lands: leaves Inductor's pool alone."""


def install(async_compile):  # noqa: ARG001
    return None
