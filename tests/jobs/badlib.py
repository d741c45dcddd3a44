"""A local module that fails while it is imported."""
CONFIG = {"lr": 0.1}
BATCH = CONFIG["batch_size"]
