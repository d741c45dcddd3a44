"""A local module beside the script."""
HIDDEN = 64


def later():
    """Imported lazily, only when called."""
    import lazy_helper  # noqa: F401
