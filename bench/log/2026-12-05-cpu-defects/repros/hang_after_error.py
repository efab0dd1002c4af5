"""A context_parallel_attention call that raises inside the ring (here: scale=nan, rejected by
attention_lse on every rank alike) leaves the next call on the same group hanging (gloo, 2 ranks).
Usage: OMP_NUM_THREADS=1 timeout 60 python hang_after_error.py ; rc 124 = hang.
faulthandler prints where each rank is stuck after 20 s."""
import faulthandler, os, socket, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch_flashattn.parallel import context_parallel_attention

def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def work(rank, world, p):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(p)); torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    faulthandler.dump_traceback_later(20, exit=True)
    q = torch.randn(1, 2, 4, 8)
    try:
        context_parallel_attention(q, q, q, scale=float("nan"))
    except RuntimeError as e:
        print(f"rank {rank}: raised as expected: {str(e)[:60]}", flush=True)
    out = context_parallel_attention(q, q, q)          # a valid call
    print(f"rank {rank}: second call returned {tuple(out.shape)}", flush=True)
    faulthandler.cancel_dump_traceback_later()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(work, args=(2, port()), nprocs=2)
