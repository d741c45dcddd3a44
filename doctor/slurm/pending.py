"""Why a job is PENDING, in words, and what to do: Slurm's Reason codes (squeue's NODELIST(REASON) column)."""

from __future__ import annotations

from typing import Optional

# reason -> (what it means, what to do, whether it can ever start as submitted)
REASONS: dict[str, tuple[str, str, bool]] = {
    "Priority": ("other jobs with a higher priority are ahead of it in the queue",
                 "Wait; `sprio -j JOBID` shows its priority and `squeue --start -j JOBID` an estimate.", True),
    "Resources": ("it is next in line and waits for nodes, CPUs, memory or GPUs to free up",
                  "Wait; asking for less (fewer nodes, less --mem, a shorter --time) can start it sooner.", True),
    "None": ("the scheduler has not looked at it yet", "Wait a few seconds.", True),
    "BeginTime": ("its --begin time (or a requeue's delay) has not come yet", "Wait, or `scontrol update "
                  "JobId=JOBID StartTime=now`.", True),
    "Dependency": ("it waits for the jobs in its --dependency to finish", "Wait for them (`squeue -j DEPS`).",
                   True),
    "DependencyNeverSatisfied": ("a job it depends on ended in a way its --dependency rules out (afterok on a "
                                 "failed job), so it will never start", "Cancel it (`scancel JOBID`), fix the "
                                 "job it depended on, and submit both again; `--kill-on-invalid-dep=yes` "
                                 "cancels such jobs automatically.", False),
    "PartitionConfig": ("it asks for more than any node of the partition has (CPUs, memory, GPUs) or for "
                        "something the partition does not allow, so it will never start",
                        "Cancel it and ask for what a node of the partition has (`scontrol show partition`, "
                        "`sinfo -N -l`), or submit to a partition with bigger nodes.", False),
    "PartitionNodeLimit": ("it asks for more nodes than the partition has or allows, so it will never start",
                           "Cancel it and ask for at most the partition's node count (`sinfo -p PARTITION`).", False),
    "PartitionTimeLimit": ("its --time is longer than the partition's MaxTime, so it will never start",
                           "Cancel it and ask for at most the partition's MaxTime, or use another partition.",
                           False),
    "PartitionDown": ("its partition is down", "Ask the admins, or submit to another partition.", False),
    "PartitionInactive": ("its partition is inactive", "Ask the admins, or submit to another partition.", False),
    "ReqNodeNotAvail": ("a node it needs is down, drained or reserved",
                        "See `sinfo -R`; drop --nodelist/-w, or wait for the node to come back.", True),
    "NodeDown": ("a node it needs is down", "See `sinfo -R`; wait for the admins or ask for other nodes.", True),
    "QOSMaxJobsPerUserLimit": ("you already run as many jobs as your QOS allows", "Wait for one to end.", True),
    "QOSMaxCpuPerUserLimit": ("your running jobs already use the CPUs your QOS allows", "Wait for one to end.",
                              True),
    "QOSMaxGRESPerUser": ("your running jobs already use the GPUs your QOS allows", "Wait for one to end.", True),
    "QOSMaxWallDurationPerJobLimit": ("its --time is over the QOS's limit, so it will never start",
                                      "Cancel it and ask for a shorter --time, or another --qos.", False),
    "QOSGrpCpuLimit": ("the QOS's shared CPU limit is used up by running jobs", "Wait.", True),
    "QOSGrpGRES": ("the QOS's shared GPU limit is used up by running jobs", "Wait.", True),
    "AssocMaxJobsLimit": ("your account already runs as many jobs as it may", "Wait for one to end.", True),
    "AssocGrpCpuLimit": ("your account's CPU limit is used up", "Wait.", True),
    "InvalidAccount": ("its --account does not exist or you are not in it, so it will never start",
                       "Cancel it and submit with an account from `sacctmgr show assoc user=$USER`.", False),
    "InvalidQOS": ("its --qos does not exist or is not allowed for you, so it will never start",
                   "Cancel it and submit with an allowed --qos.", False),
    "JobHeldUser": ("you held it (`scontrol hold` or `--hold`)", "`scontrol release JOBID`.", True),
    "JobHeldAdmin": ("an administrator held it", "Ask the admins why.", True),
    "Reservation": ("it waits for its reservation to start", "Wait for the reservation.", True),
    "BadConstraints": ("its --constraint matches no node, so it will never start",
                       "Cancel it and use features from `sinfo -o '%N %f'`.", False),
}


def explain(reason: str) -> tuple[str, str, Optional[bool]]:
    """(meaning, fix, can it start) for a Reason; an unknown one is said as Slurm's word, with None."""
    key = reason.split(",")[0].split("(")[0].strip()
    for name, v in REASONS.items():
        if key == name or (key.startswith(name) and name.startswith("QOS")):
            return v
    return (f"Slurm gives the reason {reason!r}", "See `squeue -j JOBID -l` and `scontrol show job JOBID`.", None)
