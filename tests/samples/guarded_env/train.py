"""nanoGPT's shape: a DDP branch guarded by RANK being set, reading RANK/LOCAL_RANK inside it; an optional logger
imported only when a flag is on."""
import os

wandb_log = False
ddp = int(os.environ.get('RANK', -1)) != -1  # is this a ddp run?
if ddp:
    ddp_rank = int(os.environ['RANK'])
    ddp_local_rank = int(os.environ['LOCAL_RANK'])
    device = f'cuda:{ddp_local_rank}'
else:
    ddp_rank = 0
if wandb_log and ddp_rank == 0:
    import dfdoctor_no_such_logger  # noqa: F401

print("training", ddp_rank)
