"""A training script whose entry point is never called (`main` without parentheses): it imports, prints an
import-time warning, and exits 0 before training (`exited-early`, not "ran to completion")."""
import warnings

warnings.warn("torch.cuda.amp.GradScaler(args...) is deprecated", FutureWarning)


def main():
    for step in range(100):
        print(f"step {step}", flush=True)


if __name__ == "__main__":
    main
