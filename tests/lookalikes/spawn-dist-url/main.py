"""A tiny classifier trained the way pytorch/examples' imagenet trainer is: one process per device started with
mp.spawn, each joining the group at --dist-url. One node: `python main.py --dist-url tcp://127.0.0.1:23456
--world-size 1 --rank 0 --multiprocessing-distributed`; two: the same on each node with --world-size 2 and its
--rank."""
import argparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

parser = argparse.ArgumentParser(description="tiny distributed trainer")
parser.add_argument("--epochs", default=2, type=int)
parser.add_argument("--world-size", default=-1, type=int, help="number of nodes for distributed training")
parser.add_argument("--rank", default=-1, type=int, help="node rank for distributed training")
parser.add_argument("--dist-url", default="tcp://224.66.41.62:23456", type=str, help="url used to set up "
                    "distributed training")
parser.add_argument("--dist-backend", default="gloo", type=str, help="distributed backend")
parser.add_argument("--multiprocessing-distributed", action="store_true", help="one process per device")
parser.add_argument("--procs-per-node", default=1, type=int)


def main():
    args = parser.parse_args()
    per_node = args.procs_per_node
    if args.multiprocessing_distributed:
        args.world_size = per_node * args.world_size
        mp.spawn(main_worker, nprocs=per_node, args=(per_node, args))
    else:
        main_worker(0, per_node, args)


def main_worker(local, per_node, args):
    if args.multiprocessing_distributed:
        args.rank = args.rank * per_node + local
    if args.world_size > 1 or args.multiprocessing_distributed:
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url, world_size=args.world_size,
                                rank=args.rank)
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    model = torch.nn.Linear(4, 2)
    if dist.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {args.rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
