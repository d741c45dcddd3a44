"""Found only because train.py puts src/ on sys.path before importing it."""


class DraftBlock:
    pass
