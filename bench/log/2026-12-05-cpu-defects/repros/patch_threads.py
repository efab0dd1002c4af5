"""patch_sdpa() from two threads whose blocks overlap (not nested LIFO): after both blocks have
exited, F.scaled_dot_product_attention stays patched for the whole process."""
import threading
import torch.nn.functional as F
import torch_flashattn

original = F.scaled_dot_product_attention
a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

def thread_a():
    with torch_flashattn.patch_sdpa():
        a_in.set(); b_in.wait()
    a_out.set()

def thread_b():
    a_in.wait()
    with torch_flashattn.patch_sdpa():      # saves "before" = ours
        b_in.set(); a_out.wait()
        # A has exited: B's block now runs with PyTorch's SDPA
        print("inside B's block, patched:", F.scaled_dot_product_attention is torch_flashattn.scaled_dot_product_attention)

ts = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
[t.start() for t in ts]; [t.join() for t in ts]
print("after both blocks, restored:", F.scaled_dot_product_attention is original)   # False
