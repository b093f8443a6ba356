#!/usr/bin/env python3
"""MoE dispatch and combine with rmacoll.all_to_all_single.

Every rank holds `--tokens` tokens of `--hidden` features and
`--experts-per-rank` experts. A top-k gate routes each token to k
experts; the split sizes (rows to each rank) are computed on the device
and copied to the host, as MoE layers do; the tokens travel to their
experts' ranks with all_to_all_single (dispatch), each expert transforms
its tokens, and a second all_to_all_single brings them back (combine),
where each token's k results are summed with the gate weights.

The same layer runs twice: with rmacoll.all_to_all_single and with
torch.distributed.all_to_all_single (gloo, on CPU copies: gloo has no
CUDA alltoall and one GPU cannot hold two NCCL ranks). The outputs must
be bit-identical (the same arithmetic on the same rows), and both must
match a dense reference with no communication at all (every rank knows
every expert's weights) to float tolerance.

--device-splits (CUDA only) runs the layer a third time with device split
sizes: the split sizes stay CUDA int64 tensors, the dispatch produces the
received ones on the device (out_splits=) and the combine gives them back,
so the exchanges make no host synchronisation (the expert step still
does, as the others'); it must be bit-identical to the host-split layer.
It needs one node, a GPU per rank and transports.intra_node nvlink_kernel
(set here unless RMACOLL_TRANSPORTS_INTRA_NODE is).

Run (2 ranks as processes on this host; --device cuda puts every rank on
GPU rank % device_count):
    python3 examples/moe_dispatch.py --nprocs 2 --device cpu
    python3 examples/moe_dispatch.py --nprocs 2 --device cuda --dtype bfloat16
    python3 examples/moe_dispatch.py --nprocs 2 --device cuda --device-splits
or under torchrun (one process per rank, it spawns nothing):
    torchrun --nproc-per-node 2 examples/moe_dispatch.py --device cuda
The rmacoll package is taken from python/ next to this file when it is
not installed; librmacoll as rmacoll/_lib.py says (RMACOLL_LIBRARY).
Exit code 0 when every check passed on every rank.
"""

import argparse
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(os.path.dirname(HERE), "python"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, default=0,
                   help="spawn this many ranks here (0: run as one rank of a launcher)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16", "float64"],
                   default="float32")
    p.add_argument("--tokens", type=int, default=512, help="tokens per rank")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--experts-per-rank", type=int, default=4)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="layer calls (new tokens each)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device-splits", action="store_true",
                   help="also run the layer with split sizes kept on the device (CUDA "
                        "int64 tensors, no host sync in dispatch/combine), compared bit "
                        "for bit with the host-split layer")
    args = p.parse_args(argv)
    if args.device_splits and args.device != "cuda":
        p.error("--device-splits needs --device cuda (split sizes in device memory)")
    return args


def spawn(args):
    """Starts args.nprocs copies of this script as ranks; returns the worst rc."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    argv = [a for a in sys.argv[1:]]
    for r in range(args.nprocs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nprocs), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("FI_TCP_IFACE", "lo")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv +
                                      ["--nprocs", "0"], env=env))
    rc = 0
    for p in procs:
        try:
            rc = max(rc, p.wait(timeout=600))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return 124
    return rc


class Experts:
    """The experts of the whole model: expert e is y = silu(x @ w1[e]) @ w2[e],
    with weights from a seed every rank shares."""

    def __init__(self, torch, n_experts, hidden, dtype, device, seed):
        g = torch.Generator().manual_seed(seed)
        scale = hidden ** -0.5
        self.w1 = (torch.randn(n_experts, hidden, hidden, generator=g) * scale).to(device, dtype)
        self.w2 = (torch.randn(n_experts, hidden, hidden, generator=g) * scale).to(device, dtype)
        self.gate = (torch.randn(hidden, n_experts, generator=g) * scale).to(device, dtype)

    def apply(self, torch, e, x):
        h = mm(torch, x, self.w1[e])
        h = torch.nn.functional.silu(h.float()).to(h.dtype)  # (no CPU half silu)
        return mm(torch, h, self.w2[e])


def mm(torch, a, b):
    """a @ b; float16 on the CPU goes through float32 (no CPU half matmul)."""
    if a.device.type == "cpu" and a.dtype == torch.float16:
        return (a.float() @ b.float()).to(a.dtype)
    return a @ b


def moe_layer(torch, dist, a2a, x, experts, world, epr, topk, on_cpu_copies,
              device_splits=False):
    """One MoE layer on this rank's tokens x [T, H]; a2a is the
    all_to_all_single to use. on_cpu_copies: a2a works on CPU tensors
    (the gloo reference), so the rows go to the host and back around it.
    device_splits: a2a is rmacoll's, given the split sizes as CUDA int64
    tensors (no host copy); the sizes are returned as tensors, with the
    status words of dispatch and combine (0: ok)."""
    T, H = x.shape
    n_exp = world * epr
    dev = x.device

    def comm(out, inp, osz, isz):
        if not on_cpu_copies:
            a2a(out, inp, osz, isz)
            return
        # the reference: CPU copies, and rows of floats moved as rows of bytes
        # (gloo's alltoall may lack bfloat16; a byte view moves the same bits)
        o = torch.empty(out.shape, dtype=out.dtype)
        i = inp.cpu()
        if i.dim() == 2 and i.is_floating_point():
            a2a(o.view(torch.uint8), i.view(torch.uint8), osz, isz)
        else:
            a2a(o, i, osz, isz)
        out.copy_(o)

    # gate: top-k experts per token, softmax weights over the chosen ones
    logits = mm(torch, x, experts.gate).float()
    topv, tope = torch.topk(logits, topk, dim=1)              # [T, k]
    weights = torch.softmax(topv, dim=1).to(x.dtype)
    flat_e = tope.reshape(-1)                                  # [T*k] expert of each copy
    order = torch.argsort(flat_e, stable=True)                 # group copies by expert
    tok_of = torch.arange(T, device=dev).repeat_interleave(topk)[order]
    send = x[tok_of]                                           # [T*k, H], by expert

    # split sizes on the device: copies per expert, then per rank
    per_expert = torch.bincount(flat_e, minlength=n_exp)       # [E]
    input_splits = per_expert.view(world, epr).sum(1)          # rows to each rank
    # every rank learns how many rows it gets for each of its experts from each rank
    recv_per_expert = torch.empty_like(per_expert)
    comm(recv_per_expert, per_expert, None, None)              # equal splits of epr
    output_splits = recv_per_expert.view(world, epr).sum(1)
    status = None
    if device_splits:
        # dispatch with the split sizes on the device: output holds the most
        # rows this rank can receive, the call writes the received split
        # sizes into out_splits (rows from each rank) on the stream
        isz = input_splits
        osz = torch.empty(world, dtype=torch.int64, device=dev)
        status = torch.full((2,), -1, dtype=torch.int32, device=dev)
        recv = torch.empty((world * T * topk, H), dtype=x.dtype, device=dev)
        a2a(recv, send, None, isz, out_splits=osz, status=status[0:1])
    else:
        isz = input_splits.tolist()                            # device -> host copies
        osz = output_splits.tolist()
        # dispatch
        recv = torch.empty((sum(osz), H), dtype=x.dtype, device=dev)
        comm(recv, send, osz, isz)

    # expert step: rows arrive by source rank, each block sorted by expert
    me = dist.get_rank()
    local_e = torch.arange(epr, device=dev).repeat(world)      # [world*epr]
    e_of_row = local_e.repeat_interleave(recv_per_expert.view(-1).to(dev))
    y = torch.empty_like(recv)
    for le in range(epr):
        idx = (e_of_row == le).nonzero(as_tuple=True)[0]
        if idx.numel():
            y[idx] = experts.apply(torch, me * epr + le, recv[idx])

    # combine: the reverse exchange, then the weighted sum per token
    back = torch.empty_like(send)
    if device_splits:
        # the dispatch's received sizes are what is sent back; the given
        # receive sizes (checked on the device) are the dispatch's input sizes
        a2a(back, y, isz, osz, status=status[1:2])
        return _combine(torch, back, order, weights, T, topk, H), (isz, osz, status)
    comm(back, y, isz, osz)
    return _combine(torch, back, order, weights, T, topk, H), (isz, osz, None)


def _combine(torch, back, order, weights, T, topk, H):
    copies = torch.empty_like(back)
    copies[order] = back                                       # back to token-major order
    return (copies.view(T, topk, H) * weights.unsqueeze(-1)).sum(1)


def dense_reference(torch, x, experts, topk):
    logits = mm(torch, x, experts.gate).float()
    topv, tope = torch.topk(logits, topk, dim=1)
    weights = torch.softmax(topv, dim=1).to(x.dtype)
    out = torch.zeros_like(x)
    for j in range(topk):
        for e in tope[:, j].unique().tolist():
            idx = (tope[:, j] == e).nonzero(as_tuple=True)[0]
            out[idx] += experts.apply(torch, e, x[idx]) * weights[idx, j].unsqueeze(-1)
    return out


def run_rank(args):
    # the two layers must agree bit for bit: deterministic cuBLAS workspaces
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.distributed as dist

    import rmacoll

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        ndev = torch.cuda.device_count()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % ndev)
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    if args.device_splits:
        # the transport that runs device-split calls (the default ce has none)
        os.environ.setdefault("RMACOLL_TRANSPORTS_INTRA_NODE", "nvlink_kernel")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dtype = getattr(torch, args.dtype)
    epr = args.experts_per_rank
    experts = Experts(torch, world * epr, args.hidden, dtype, device, args.seed)
    tol = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 2e-2,
           torch.bfloat16: 6e-2}[dtype]
    ok = True
    t_rm = t_ref = t_dev = 0.0
    for step in range(args.steps):
        g = torch.Generator().manual_seed(args.seed * 100003 + step * 1009 + rank)
        x = torch.randn(args.tokens, args.hidden, generator=g).to(device, dtype)

        def rm_a2a(out, inp, osz, isz):
            rmacoll.all_to_all_single(out, inp, osz, isz)

        def ref_a2a(out, inp, osz, isz):
            dist.all_to_all_single(out, inp, osz, isz)

        def dev_a2a(out, inp, osz, isz, **kw):
            rmacoll.all_to_all_single(out, inp, osz, isz, **kw)

        dist.barrier()
        t0 = time.perf_counter()
        y_rm, (isz, osz, _) = moe_layer(torch, dist, rm_a2a, x, experts, world, epr,
                                        args.topk, on_cpu_copies=False)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        y_ref, _ = moe_layer(torch, dist, ref_a2a, x, experts, world, epr, args.topk,
                             on_cpu_copies=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        if args.device_splits:
            y_dev, (_, dosz, status) = moe_layer(torch, dist, dev_a2a, x, experts, world, epr,
                                                 args.topk, on_cpu_copies=False,
                                                 device_splits=True)
            torch.cuda.synchronize()
            t3 = time.perf_counter()
            rmacoll.device_counts_check()  # raises what the device found, if anything
            dev_ok = (status.tolist() == [0, 0] and dosz.tolist() == osz and
                      torch.equal(y_dev, y_rm))
            ok = ok and dev_ok
            if step > 0:
                t_dev += t3 - t2
            print("rank %d step %d: device split sizes: received %s rows, status %s, "
                  "== host split sizes: %s" % (rank, step, dosz.tolist(), status.tolist(),
                                               "ok" if dev_ok else "FAIL"), flush=True)
        if step > 0:  # the first step makes the rmacoll communicator
            t_rm += t1 - t0
            t_ref += t2 - t1
        same = torch.equal(y_rm, y_ref)
        dense = dense_reference(torch, x, experts, args.topk)
        err = (y_rm.float() - dense.float()).abs().max().item()
        scale = dense.float().abs().max().item() or 1.0
        close = err <= tol * scale
        ok = ok and same and close
        print("rank %d step %d: sent %s rows, received %s rows; rmacoll == torch.distributed: "
              "%s; max |rmacoll - dense| = %.3g (scale %.3g, tolerance %.3g): %s"
              % (rank, step, isz, osz, same, err, scale, tol * scale,
                 "ok" if close else "FAIL"), flush=True)
    if args.steps > 1:
        print("rank %d: layer time per step %.3f ms with rmacoll, %.3f ms with gloo on CPU "
              "copies (%s, %d tokens x %d)" % (rank, 1e3 * t_rm / (args.steps - 1),
                                             1e3 * t_ref / (args.steps - 1), args.device,
                                             args.tokens, args.hidden), flush=True)
        if args.device_splits:
            print("rank %d: layer time per step %.3f ms with rmacoll and device split sizes"
                  % (rank, 1e3 * t_dev / (args.steps - 1)), flush=True)
    flags = torch.tensor([0 if ok else 1])
    dist.all_reduce(flags)
    all_ok = flags.item() == 0
    rmacoll.destroy_group_communicators()
    dist.destroy_process_group()
    if rank == 0:
        print("moe_dispatch: %s" % ("PASS on every rank" if all_ok else "FAIL"), flush=True)
    return 0 if all_ok else 1


def main():
    args = parse_args()
    if args.nprocs > 0:
        return spawn(args)
    return run_rank(args)


if __name__ == "__main__":
    sys.exit(main())
