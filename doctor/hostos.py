"""This machine's platform as a report names it (`Linux-6.1.0-13-amd64-x86_64-with-glibc2.36`), the string
`platform.platform()` gives, without the process it starts for it: on Linux that call forks `uname -p` for the
processor's name (a fork of the whole dfdoctor process, in every check, launch and status; issue 45). GNU's
`uname -p` says `unknown` there (Debian, Ubuntu) or the machine's name (Fedora's patch), and `platform()` drops
both, so the string is the same without asking. Other systems are asked as before."""

from __future__ import annotations

import os
import platform


def platform_name() -> str:
    uname = os.uname()
    if uname.sysname != "Linux":
        return platform.platform()
    libc, version = platform.libc_ver()  # glibc's own answer (confstr), read in this process
    # the arguments platform.platform() gives its formatter on Linux, the processor's name left out (see above)
    return platform._platform(uname.sysname, uname.release, uname.machine, "with", libc + version)
