from .attention import flex  # there is no attention.py: a relative import that fails


class Block:
    pass
