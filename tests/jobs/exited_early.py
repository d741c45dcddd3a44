"""Defines main() but never calls it: exits 0 at once without a word: `exited-early`."""


def main():
    print("training...")


if __name__ == "__mian__":
    main()
