"""The drafter: line 6 has an unclosed bracket."""
import math


def run():
    blocks = [math.sqrt(x) for x in range(4]
    return blocks
