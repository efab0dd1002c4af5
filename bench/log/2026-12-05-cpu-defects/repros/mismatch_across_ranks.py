"""Shards that differ across ranks in what the all_gather check (parallel.py:224-229) does not look at.
  MODE=dtype : rank 0 fp32, rank 1 bf16, same shapes -> rank 1 dies (SIGABRT, gloo EnforceNotMet
               'Received data size doesn't match'), rank 0 returns a result built from a half-filled
               torch.empty_like buffer, no error.
  MODE=v     : v of rank 1 has d=16 (k has 8); v's shape is not gathered -> rank 1 raises torch.stack's
               'stack expects each tensor to be equal size', rank 0 enters the ring and waits for ever
               (here rank 1 then waits in a barrier, as the next collective of a program would).
Usage: MODE=v OMP_NUM_THREADS=1 timeout 60 python mismatch_across_ranks.py ; rc 124 = hang."""
import os, socket
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch_flashattn.parallel import context_parallel_attention

def work(rank, world, p, mode):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(p)); torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if mode == "dtype":
        dt = torch.float32 if rank == 0 else torch.bfloat16
        q = torch.randn(1, 2, 4, 8).to(dt); k = v = q
    else:
        q = k = torch.randn(1, 2, 4, 8); v = torch.randn(1, 2, 4, 8 if rank == 0 else 16)
    try:
        out = context_parallel_attention(q, k, v)
        print(f"rank {rank}: returned {out.dtype} {tuple(out.shape)} without error", flush=True)
    except Exception as e:
        print(f"rank {rank}: {type(e).__name__}: {str(e)[:90]}", flush=True)
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    mp.spawn(work, args=(2, p, os.environ.get("MODE", "v")), nprocs=2)
