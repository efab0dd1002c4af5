"""Rank 1's v differs from its k (last dim) -> only rank 1 raises; rank 0 waits in the ring.
The all_gather check (parallel.py:224) covers q.shape and k.shape only."""
import os, datetime, socket, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch_flashattn.parallel import context_parallel_attention

MODE = sys.argv[1] if len(sys.argv) > 1 else "v_dim"

def worker(rank, world, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=15))
    q = torch.randn(1, 2, 4, 8); k = torch.randn(1, 2, 4, 8); v = torch.randn(1, 2, 4, 8)
    if rank == 1:
        if MODE == "v_dim": v = torch.randn(1, 2, 4, 16)      # v's head dim differs on rank 1
        if MODE == "v_batch": v = torch.randn(2, 2, 4, 8)     # v's batch differs on rank 1
        if MODE == "dtype": q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
        if MODE == "bad_hq": q = torch.randn(1, 3, 4, 8)    # q heads not a multiple of k heads, on rank 1 only: caught by the all_gather
    t = time.time()
    try:
        context_parallel_attention(q, k, v)
        print(f"rank {rank}: returned after {time.time()-t:.1f}s", flush=True)
    except Exception as e:
        print(f"rank {rank}: {type(e).__name__} after {time.time()-t:.1f}s: {str(e)[:160]}", flush=True)

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port), nprocs=2, join=True)
