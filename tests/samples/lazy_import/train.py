import os


def evaluate():
    """Only runs after the first epoch: the missing package hurts hours in."""
    import rouge_score_not_installed_here
    return rouge_score_not_installed_here


def maybe_log(enabled):
    if enabled:
        import wandb_not_installed_here  # conditional: not reported
    try:
        import tensorboard_not_installed_here  # guarded: not reported
    except ImportError:
        pass


if __name__ == "__main__":
    evaluate()
