"""rmacoll as a torch.distributed backend, under torchrun.

    torchrun --standalone --nproc_per_node=4 examples/torch_backend.py
    torchrun --standalone --nproc_per_node=2 examples/torch_backend.py --device cuda
    # torch >= 2.0: other collectives on CPU tensors through gloo
    torchrun --standalone --nproc_per_node=2 examples/torch_backend.py --device cuda \
        --backend cpu:gloo,cuda:rmacoll

(with the package from the checkout: PYTHONPATH=python; the library as
docs/python.md says.) Each rank sends r + j + 1 rows to rank j with
dist.all_to_all_single, then the same blocks as a list with
dist.all_to_all, and checks what arrived: row values name the sender and
the receiver.
"""

import argparse
import os

import torch
import torch.distributed as dist

import rmacoll
import rmacoll.torch_backend  # noqa: F401 - registers the backend "rmacoll"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--backend", default="rmacoll")
    p.add_argument("--hidden", type=int, default=8)
    a = p.parse_args()
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group(backend=a.backend)
    r, n = dist.get_rank(), dist.get_world_size()

    send = [r + j + 1 for j in range(n)]      # rows to each rank
    recv = [i + r + 1 for i in range(n)]      # rows from each rank
    inp = torch.cat([torch.full((send[j], a.hidden), 100.0 * r + j) for j in range(n)])
    inp = inp.to(a.device)
    out = torch.empty(sum(recv), a.hidden, device=a.device)
    work = dist.all_to_all_single(out, inp, recv, send, async_op=True)
    work.wait()  # CUDA: the current stream waits for the call; CPU: done already
    want = torch.cat([torch.full((recv[i], a.hidden), 100.0 * i + r) for i in range(n)])
    ok = torch.equal(out.cpu(), want)

    outs = [torch.empty(recv[i], a.hidden, device=a.device) for i in range(n)]
    dist.all_to_all(outs, list(inp.split(send)))
    ok = ok and all(torch.equal(outs[i].cpu(), torch.full((recv[i], a.hidden), 100.0 * i + r))
                    for i in range(n))

    try:
        dist.all_reduce(torch.ones(1))  # gloo with "cpu:gloo,cuda:rmacoll", else an error
        other = "all_reduce of a CPU tensor: served by %s" % a.backend.split(",")[0]
    except rmacoll.UnsupportedError as e:
        other = "all_reduce: %s" % str(e).split(":", 2)[-1].strip()[:60] + "..."
    print("rank %d of %d: all_to_all_single and all_to_all %s; %s"
          % (r, n, "exact" if ok else "WRONG", other), flush=True)
    rmacoll.destroy_group_communicators()  # collective: before destroy_process_group
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
