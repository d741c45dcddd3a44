"""One module per kind of `--target`, each a `TargetKind` subclass. ALL is the one registration: a new kind is
a new module here and one entry below (docs/architecture.md, "A target kind"); the order is the order USAGE
names them in."""

from dfdoctor.targets.kinds.docker import Docker
from dfdoctor.targets.kinds.local import Local
from dfdoctor.targets.kinds.lxc import Lxc
from dfdoctor.targets.kinds.pct import Pct
from dfdoctor.targets.kinds.ssh import Ssh
from dfdoctor.targets.registry import register

ALL = (Local, Ssh, Pct, Lxc, Docker)
for _kind in ALL:
    register(_kind)
