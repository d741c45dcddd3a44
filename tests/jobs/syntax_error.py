"""Does not compile: `syntax-error`."""
def main(:
    print("never reached")
