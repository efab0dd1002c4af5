import os, socket, traceback, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch_flashattn.parallel import context_parallel_attention as cpa
import torch_flashattn
def work(rank, world, p):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(p)); torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    q = torch.randn(1, 2, 4, 8).requires_grad_()
    try:
        o = cpa(q, q, q, causal=True)
        torch.autograd.grad(o.pow(2).sum(), q, create_graph=True)
        print("ok")
    except Exception:
        if rank == 0: traceback.print_exc()
    dist.destroy_process_group()
if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    mp.spawn(work, args=(2, p), nprocs=2)
    q = torch.randn(1, 2, 4, 8).requires_grad_()
    (gq,) = torch.autograd.grad(torch_flashattn.attention(q, q, q, causal=True).pow(2).sum(), q, create_graph=True)
    print("single-process create_graph=True: first-order grad ok", gq.requires_grad)
