"""A silent loop of 0.1 s sleeps, printing nothing (its stdout block-buffered, empty): the edge of the sleep-loop
rule, 10 wake-ups a second. It sleeps until it is killed."""
import time

while True:
    time.sleep(0.1)
