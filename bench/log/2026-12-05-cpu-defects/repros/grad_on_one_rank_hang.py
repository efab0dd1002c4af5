"""Mixed per-rank conditions that pass the all_gather check (parallel.py, context_parallel_attention).
MODE=grad: rank 0's q requires grad, rank 1's does not -> rank 0's backward waits for a ring rank 1 never joins.
MODE=kdtype: rank 1 alone has bf16 k/v beside fp32 q (only q's dtype is gathered)."""
import os, datetime, socket, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch_flashattn.parallel import context_parallel_attention
MODE = sys.argv[1] if len(sys.argv) > 1 else "grad"

def worker(rank, world, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=15))
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    t = time.time()
    try:
        if MODE == "grad":
            q.requires_grad_(rank == 0)
            out = context_parallel_attention(q, k, v, causal=True)
            if out.requires_grad:
                out.sum().backward()
        else:
            if rank == 1: k, v = k.bfloat16(), v.bfloat16()
            out = context_parallel_attention(q, k, v)
        print(f"rank {rank}: returned after {time.time()-t:.1f}s", flush=True)
    except Exception as e:
        print(f"rank {rank}: {type(e).__name__} after {time.time()-t:.1f}s: {str(e)[:200]}", flush=True)
    time.sleep(20)   # the process stays alive (as a training loop would); the peer's wait is bounded only by the PG timeout
    dist.destroy_process_group()

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port), nprocs=2, join=True)
