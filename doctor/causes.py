"""The stable cause ids of docs/interface.md: each names one reason a launch shows no log or no process.

Scripts match on these strings, so they never change; a new cause is a new constant here and a row in
docs/interface.md. Checks import the constants, which keeps the catalogue greppable.
"""

COMMAND_NOT_FOUND = "command-not-found"
MISSING_MODULE = "missing-module"
SYNTAX_ERROR = "syntax-error"
IMPORT_ERROR = "import-error"
IMPORT_HANG = "import-hang"
EXITED_EARLY = "exited-early"
CRASHED = "crashed"
KILLED_BY_SIGNAL = "killed-by-signal"
OOM_KILLED = "oom-killed"
KILLED_ON_SESSION_EXIT = "killed-on-session-exit"
LOG_DIR_MISSING = "log-dir-missing"
LOG_NOT_WRITABLE = "log-not-writable"
DISK_FULL = "disk-full"
READ_ONLY_FS = "read-only-fs"  # the job wrote into a read-only file system (EROFS)
LOG_ELSEWHERE = "log-elsewhere"
OUTPUT_BUFFERED = "output-buffered"
DEPENDENCY_MISSING = "dependency-missing"
DEPENDENCY_MISMATCH = "dependency-mismatch"
CUDA_UNAVAILABLE = "cuda-unavailable"
CUDA_INIT_FAILED = "cuda-init-failed"
CUDA_INIT_HANG = "cuda-init-hang"
FX_TRACE_RACE = "fx-trace-race"
COMPILE_DEADLOCK = "compile-deadlock"
PTY_EXHAUSTED = "pty-exhausted"
# Added beyond docs/interface.md v1 (an extension, not a change): a GPU group that cannot form is not CUDA init.
NCCL_FAILED = "nccl-failed"
NCCL_HANG = "nccl-hang"
# The host or container could not be reached at all (ssh, lxc-attach or the docker client failed): nothing
# can be started there, so there is no process and no log.
TARGET_UNREACHABLE = "target-unreachable"
# The user ended the job with `dfdoctor stop` (doctor/diagnose/stopped.py): nothing failed.
STOPPED_BY_USER = "stopped-by-user"
# Slurm (docs/slurm.md): what the scheduler did to a job, beyond what a local launch can show.
TIME_LIMIT = "time-limit"  # Slurm ended the job at its --time limit (TIMEOUT)
NODE_FAILURE = "node-failure"  # a node of the job stopped answering (NODE_FAIL)
PREEMPTED = "preempted"  # a higher-priority job took the job's nodes (PREEMPTED)
STEP_FAILED = "step-failed"  # the batch script exited 0 while one of its srun steps failed (DerivedExitCode)
NEVER_STARTS = "never-starts"  # the job asks for what its partition can never give: it would pend forever
SBATCH_REFUSED = "sbatch-refused"  # sbatch itself refuses the submission (CRLF, no #!, a bad option value...)
CANCELLED = "cancelled"  # someone cancelled the job (scancel; sacct says by whom): nothing failed in the job
# What training jobs die of at run time, read from their exception (doctor/diagnose/rules_runtime.py).
CUDA_OOM = "cuda-oom"
CUDA_ERROR = "cuda-error"
SHM_EXHAUSTED = "shm-exhausted"
FD_EXHAUSTED = "fd-exhausted"
DOWNLOAD_FAILED = "download-failed"
COLLECTIVE_TIMEOUT = "collective-timeout"

# A quiet job's stacks, all its processes sampled twice (doctor/diagnose/stuck.py).
RANK_MISSING = "rank-missing"  # ranks wait in init_process_group for a rank that never arrived
COLLECTIVE_HANG = "collective-hang"  # ranks wait in a collective another rank never called
DATALOADER_STUCK = "dataloader-stuck"  # the loop waits for a batch; a DataLoader worker is stuck or dead
WAITING_FOR_INPUT = "waiting-for-input"  # blocked reading stdin
WAITING_ON_LOCK = "waiting-on-lock"  # blocked on a file lock another process holds
SLEEPING = "sleeping"  # asleep in time.sleep or a `sleep` command (state running: nothing shows it broken)
WAITING_ON_NETWORK = "waiting-on-network"  # blocked reading a socket (a download, a remote service)
CUDA_SYNC_WAIT = "cuda-sync-wait"  # blocked in CUDA synchronisation: the GPU has not finished
COMPILE_WORKERS_WAIT = "compile-workers-wait"  # waiting for torch.compile's worker processes
STUCK = "stuck"  # every thread of every process waits (Event, Condition, join, queue, pipe) and nothing moved
WORKERS_DIED = "workers-died"  # worker processes died unreaped while the job sleeps on (no traceback of theirs)

ALL = frozenset(v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str))

# Findings after which a launch cannot produce a log: `launch` stops on them unless --force.
LAUNCH_BLOCKERS = frozenset({COMMAND_NOT_FOUND, SYNTAX_ERROR, MISSING_MODULE,
                             LOG_DIR_MISSING, LOG_NOT_WRITABLE, DISK_FULL, TARGET_UNREACHABLE,
                             NEVER_STARTS})
# What training jobs die of, from the corpus of real failures (doctor/diagnose/known_failures.py).
INPUT_MISSING = "input-missing"  # a file or data set the job reads does not exist (resolved against its cwd)
OUTPUT_DIR_MISSING = "output-dir-missing"  # the folder the job saves into (not its log) does not exist
DISTRIBUTED_ENV_MISSING = "distributed-env-missing"  # RANK/WORLD_SIZE/MASTER_ADDR unset: not started by torchrun
PORT_IN_USE = "port-in-use"  # the rendezvous port is taken
BUILD_ENV_MISSING = "build-env-missing"  # an extension or torch.compile needs a toolchain (CUDA_HOME, ninja, gcc)
COMPILE_FAILED = "compile-failed"  # torch.compile cannot run with this Python or torch
CHECKPOINT_INCOMPATIBLE = "checkpoint-incompatible"  # saved on GPU, weights_only, other keys or shapes, truncated
HUB_ACCESS_DENIED = "hub-access-denied"  # a gated or private model without an accepted token
DEVICE_MISMATCH = "device-mismatch"  # tensors on different devices (or dtypes) meet in one op
SHAPE_MISMATCH = "shape-mismatch"
DTYPE_MISMATCH = "dtype-mismatch"
AUTOGRAD_ERROR = "autograd-error"  # in-place modification, backward twice, a loss without grad
INDEX_OUT_OF_RANGE = "index-out-of-range"  # a label or token id outside the model's range
DATALOADER_FAILED = "dataloader-failed"  # workers could not start or died
DDP_UNUSED_PARAMETERS = "ddp-unused-parameters"
# A job that exited 0 quickly without doing any work, printing why (doctor/diagnose/did_nothing.py).
DID_NOTHING = "did-nothing"
# The job's own argument parser refused its command line (exit 2): the argument, and the closest valid option.
BAD_ARGUMENTS = "bad-arguments"
# A config file the job loads does not parse (a yaml indentation error): the file, line, and what loaded it.
CONFIG_INVALID = "config-invalid"
# A loop that spins over a DataLoader yielding no batch (a validation split smaller than one batch): seen from the
# stacks at the `for` head in every look, the body never (doctor/diagnose/empty_loop.py).
DATA_EMPTY = "data-empty"
# Ray (docs/ray.md): what a Ray cluster does to a job submitted with `ray job submit`, read over its HTTP APIs.
RAY_INFEASIBLE_RESOURCES = "ray-infeasible-resources"  # a request no node has: it pends forever
RAY_PENDING_NO_CAPACITY = "ray-pending-no-capacity"  # a request a node could hold waits: its resources are taken
RAY_RUNTIME_ENV_FAILED = "ray-runtime-env-failed"  # the runtime_env (pip, working_dir) could not be set up
RAY_ACTOR_DIED = "ray-actor-died"  # the job SUCCEEDED (its driver exited 0) while its tasks or actors failed
RAY_ACTOR_OOM = "ray-actor-oom"  # Ray's memory monitor killed a worker
# A driver's `ray.init()` that started a private local Ray instance instead of joining the cluster meant (the one
# its job was submitted to, or RAY_ADDRESS/--target): Ray's own "Started a local Ray instance" line, and no driver
# of the job connected to the cluster (the job API's job_id is empty).
RAY_WRONG_CLUSTER = "ray-wrong-cluster"
# sbatch refusing the submission (seen by `sbatch --test-only`): nothing would be queued, so nothing could log;
# a Ray entrypoint asking for what no node has would pend forever; a runtime env pip cannot resolve here would
# fail on the node after Ray's retries (ray.requirements).
LAUNCH_BLOCKERS = LAUNCH_BLOCKERS | {SBATCH_REFUSED, RAY_INFEASIBLE_RESOURCES, RAY_RUNTIME_ENV_FAILED}
# Blockers past which nothing can start even with --force (no connection to start it over): no --force offer.
NOTHING_CAN_START = frozenset({TARGET_UNREACHABLE})
ALL = frozenset(v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str) and k not in ("LAUNCH_BLOCKERS", "NOTHING_CAN_START"))

