"""limits.open-files: will the job run out of file descriptors?

DataLoader workers, NCCL and torch.compile's cache each hold many descriptors; a container's default soft
limit of 1024 ends a run with "Too many open files" hours in. The check reads the limit the job would inherit.
"""

import resource

from dfdoctor import check, ok, warn

ENOUGH = 65536


@check("limits.open-files", title="The open-files limit is high enough", phases=("pre",), timeout=5)
def open_files(ctx):
    """Compare RLIMIT_NOFILE with what a multi-worker training job needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    facts = {"soft": soft, "hard": hard}
    if soft != resource.RLIM_INFINITY and soft < ENOUGH:
        if hard == resource.RLIM_INFINITY or hard >= ENOUGH:
            fix = f"run `ulimit -n {ENOUGH}` in the shell that launches the job"
        else:
            fix = (f"the hard limit is {hard}: raise it (limits.conf, docker --ulimit nofile=, lxc.prlimit.nofile) "
                   f"and then `ulimit -n {ENOUGH}`")
        yield warn(f"the open-files limit is {soft} (hard {hard}); data loaders and NCCL can exhaust it",
                   fix=fix, data={"nofile": facts})
    else:
        yield ok(f"the open-files limit is {soft}", data={"nofile": facts})
