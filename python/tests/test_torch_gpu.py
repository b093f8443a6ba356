"""torch tests of the rmacoll Python package: rmacoll.all_to_all_single on
torch tensors against torch.distributed.all_to_all_single (gloo, on CPU
copies; one GPU cannot hold two NCCL ranks), ranks as processes
(torch_worker.py), and the MoE example.

  TestTorchCPU  torch needed: CPU tensors through a gloo group, and
                examples/moe_dispatch.py --device cpu; the argument errors of
                device split sizes (CUDA split tensors as stand-ins).
  TestTorchGPU  torch with CUDA needed: CUDA tensors (2 and 4 ranks on the
                GPUs there are, rank r on GPU r % count), streams, async_op,
                errors, the MoE example on CUDA; the NCCL bootstrap, device
                split sizes (CUDA split tensors, nvlink_kernel) and the MoE
                example with --device-splits when there are 2 GPUs or more.

Run: python3 test_torch_gpu.py [-v] [TestTorchGPU]   (from python/tests)
Exit 77 (CTest: skipped) when torch, or for TestTorchGPU CUDA, is missing.
"""

import json
import os
import socket
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(PKG_ROOT)
WORKER = os.path.join(HERE, "torch_worker.py")
EXAMPLE = os.path.join(REPO, "examples", "moe_dispatch.py")

try:
    import torch
except ImportError:
    torch = None

HAVE_CUDA = torch is not None and torch.cuda.is_available()
# device split sizes run on the nvlink_kernel transport (the default ce has none)
DEVICE_SPLITS_ENV = {"RMACOLL_TRANSPORTS_INTRA_NODE": "nvlink_kernel"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_ranks(scenario, nranks, node_of=None, timeout=600, extra_env=None):
    port = free_port()
    procs = []
    for r in range(nranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nranks), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"]
                                        if env.get("PYTHONPATH") else "")
        env.setdefault("FI_TCP_IFACE", "lo")
        env.setdefault("RMACOLL_TIMEOUT_MS", "60000")
        if node_of is not None:
            env["RMACOLL_NODE_ID"] = "vnode-%d" % node_of[r]
        env.update(extra_env or {})
        procs.append(subprocess.Popen([sys.executable, WORKER, scenario], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    res = []
    for r, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            err = "killed after %d s\n%s" % (timeout, err)
        rep = None
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                rep = json.loads(line)
                break
        res.append((p.returncode, rep, err))
    return res


class Base(unittest.TestCase):
    def check_ranks(self, scenario, nranks, node_of=None, min_checks=1, extra_env=None):
        res = run_ranks(scenario, nranks, node_of, extra_env=extra_env)
        why = "\n".join("rank %d rc %s report %s\n%s" % (r, rc, rep, err[-3000:])
                        for r, (rc, rep, err) in enumerate(res))
        names = None
        for rc, rep, err in res:
            self.assertEqual(rc, 0, why)
            self.assertIsNotNone(rep, why)
            self.assertGreaterEqual(len(rep["checks"]), min_checks, why)
            for c in rep["checks"]:
                self.assertTrue(c["ok"], "%s: %s" % (c["name"], c["detail"]))
                if c.get("unavailable"):
                    print("note: %s: %s" % (c["name"], c["detail"]))
            these = [(c["name"], c.get("cls")) for c in rep["checks"]]
            names = these if names is None else names
            self.assertEqual(these, names, "ranks differ in checks or exception classes")
        return res

    def run_example(self, *args):
        env = dict(os.environ)
        env.setdefault("FI_TCP_IFACE", "lo")
        p = subprocess.run([sys.executable, EXAMPLE] + list(args), env=env,
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout[-4000:] + p.stderr[-4000:])
        self.assertIn("moe_dispatch: PASS on every rank", p.stdout)
        print(p.stdout.strip().splitlines()[-2])


@unittest.skipIf(torch is None, "torch is not importable")
class TestTorchCPU(Base):
    def test_cpu_tensors_one_node(self):
        self.check_ranks("cpu", 2, min_checks=18)

    def test_cpu_tensors_virtual_nodes(self):
        self.check_ranks("cpu", 3, node_of=[0, 1, 1], min_checks=18)

    def test_device_split_errors(self):
        """Device split sizes without a GPU: CUDA split tensors (stand-ins)
        with CPU tensors fail with the argument named and nothing written;
        CPU split tensors keep the host path."""
        sys.path.insert(0, PKG_ROOT)
        import rmacoll
        from fakes import FakeCudaTensor as F
        x = torch.arange(12, dtype=torch.bfloat16).reshape(4, 3)
        y = torch.full((4, 3), 7, dtype=torch.bfloat16)
        with rmacoll.Communicator(0, 1, rmacoll.get_unique_id()) as comm:
            cases = [
                (torch.tensor([4]), F((1,)),
                 "output_split_sizes is a CPU tensor but input_split_sizes is a CUDA tensor"),
                (F((1,)), torch.tensor([4]),
                 "output_split_sizes is a CUDA tensor but input_split_sizes is a CPU tensor"),
                (None, F((1,), "torch.int32"),
                 "input_split_sizes is a CUDA tensor of dtype int32; it must be int64 "
                 "(convert with .to(torch.int64))"),
                (None, F((3,)), "input_split_sizes has shape (3,); it must be 1-d with one "
                 "entry per rank of the group (1)"),
                (F((1,)), F((1,)), "input_split_sizes is a CUDA tensor but input and output "
                 "are in host memory: device split sizes need CUDA tensors"),
            ]
            for osz, isz, text in cases:
                with self.assertRaises(rmacoll.InvalidArgumentError, msg=text) as cm:
                    rmacoll.all_to_all_single(y, x, osz, isz, comm=comm)
                self.assertIn("rank 0: " + text, str(cm.exception))
                self.assertTrue(bool((y == 7).all()))
            with self.assertRaises(rmacoll.InvalidArgumentError) as cm:
                rmacoll.all_to_all_single(y, x, [4], torch.tensor([4]), comm=comm,
                                          out_splits=torch.zeros(1, dtype=torch.int64))
            self.assertIn("rank 0: out_splits is a CPU tensor but input_split_sizes is a "
                          "CPU tensor: device split sizes", str(cm.exception))
            # CPU int64 split tensors: the host path, as before
            rmacoll.all_to_all_single(y, x, torch.tensor([4]), torch.tensor([4]), comm=comm)
            self.assertTrue(torch.equal(y, x))

    def test_moe_example_cpu(self):
        self.run_example("--nprocs", "2", "--device", "cpu", "--steps", "2")
        self.run_example("--nprocs", "3", "--device", "cpu", "--dtype", "bfloat16",
                         "--steps", "2", "--topk", "3")


@unittest.skipIf(not HAVE_CUDA, "torch with CUDA is not available")
class TestTorchGPU(Base):
    def test_cuda_tensors_2_ranks(self):
        self.check_ranks("gpu", 2, min_checks=25)

    def test_cuda_tensors_4_ranks(self):
        self.check_ranks("gpu", 4, min_checks=25)

    def test_memreg_segments(self):
        """rmacoll.TorchSegments: caching-allocator segments registered
        once, calls on tensors in them exact; one node and two virtual
        nodes (staged, or registered where the transport takes device
        memory). Not run yet: written on a machine without a GPU."""
        self.check_ranks("gpu_memreg", 2, min_checks=5)
        self.check_ranks("gpu_memreg", 2, node_of=[0, 1], min_checks=5)

    def test_moe_example_cuda(self):
        self.run_example("--nprocs", "2", "--device", "cuda", "--dtype", "bfloat16")
        self.run_example("--nprocs", "2", "--device", "cuda", "--dtype", "float32",
                         "--tokens", "4096", "--hidden", "1024")

    @unittest.skipIf(HAVE_CUDA and torch.cuda.device_count() < 2,
                     "device split sizes need a GPU per rank (ranks of one GPU in separate "
                     "processes: UnsupportedError)")
    def test_device_splits_2_ranks(self):
        self.check_ranks("device_splits", 2, min_checks=47, extra_env=DEVICE_SPLITS_ENV)

    @unittest.skipIf(HAVE_CUDA and torch.cuda.device_count() < 2,
                     "device split sizes need a GPU per rank")
    def test_moe_example_device_splits(self):
        self.run_example("--nprocs", "2", "--device", "cuda", "--dtype", "bfloat16",
                         "--device-splits")

    @unittest.skipIf(HAVE_CUDA and torch.cuda.device_count() < 2,
                     "the NCCL bootstrap needs a GPU per rank")
    def test_nccl_bootstrap(self):
        self.check_ranks("nccl_bootstrap", 2)


if __name__ == "__main__":
    want_gpu = any("GPU" in a for a in sys.argv[1:])
    if torch is None or (want_gpu and not HAVE_CUDA):
        print("torch%s is not available to %s: skipped"
              % (" with CUDA" if torch is not None else "", sys.executable))
        sys.exit(77)
    unittest.main(verbosity=2)
