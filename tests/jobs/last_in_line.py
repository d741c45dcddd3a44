"""For jobs that spin the CPU on purpose: busy, but last in line for it, so the machine's other work goes first."""
import os


def last_in_line():
    os.nice(19)
    if os.getsid(0) == os.getpid():  # a session of its own (dfdoctor's spawn): the kernel's autogroup is the job's
        # alone, and with autogroups on, nice counts only inside one: the autogroup's own nice puts the job last
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write("19")
        except OSError:
            pass  # no autogroups (CONFIG_SCHED_AUTOGROUP off): os.nice above is the whole of it
