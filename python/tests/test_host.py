"""Host-memory tests of the rmacoll Python package (no torch needed).

Ranks are processes (mprun.py, rank_worker.py) over virtual nodes
(RMACOLL_NODE_ID): ce inside a node, libfabric tcp on loopback between
nodes. Every receive buffer is compared byte for byte with a numpy
reference inside sentinel guards; error cases must raise the same
exception class on every rank and write nothing.

Run: RMACOLL_LIBRARY=build/librmacoll.so python3 -m unittest -v
(from python/tests; ctest runs it as test_python_host).
"""

import inspect
import os
import pickle
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

try:
    import numpy as np
except ImportError:  # pragma: no cover - CTest reads exit code 77 as skipped
    print("numpy is not importable from %s; skipping" % sys.executable)
    sys.exit(77)

import mprun  # noqa: E402
from fakes import FakeCudaTensor  # noqa: E402
import rmacoll  # noqa: E402
from rmacoll import _buffers, _lib  # noqa: E402

# checks every rank of a scenario must report (a worker that skipped some fails)
EXPECTED_CHECKS = {"data": 22, "raw": 3, "errors": 13, "from_env": 2, "abort": 5, "reuse": 28,
                   "memreg": 19, "shrink": 6}


class TestLibrary(unittest.TestCase):
    def test_status_classes_match_the_library(self):
        lib = rmacoll.load_library()
        self.assertEqual(lib.rmacoll_status_name(0).decode(), "RMACOLL_SUCCESS")
        for code in range(1, 20):
            cls = rmacoll.STATUS_CLASSES[code]
            self.assertEqual(cls.status, code)
            self.assertEqual(lib.rmacoll_status_name(code).decode(), cls.status_name)
            self.assertTrue(issubclass(cls, rmacoll.RmacollError))
        self.assertEqual(sorted(rmacoll.STATUS_CLASSES), list(range(1, 20)))
        # a code the package does not know still raises an RmacollError
        e = rmacoll._errors.error_for(99, "rank 0: new", rank=0)
        self.assertIsInstance(e, rmacoll.UnknownStatusError)
        self.assertEqual(e.status, 99)

    def test_version(self):
        v = rmacoll.library_version()
        if rmacoll.has_symbol("rmacoll_get_version"):
            self.assertEqual(v, tuple(int(x) for x in rmacoll.__version__.split(".")))
        else:
            self.assertIsNone(v)

    def test_builtin_bases(self):
        self.assertTrue(issubclass(rmacoll.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(rmacoll.MismatchError, rmacoll.InvalidArgumentError))
        self.assertTrue(issubclass(rmacoll.DatatypeError, TypeError))
        self.assertTrue(issubclass(rmacoll.PeerTimeoutError, TimeoutError))

    def test_datatypes_match_the_library(self):
        lib = rmacoll.load_library()
        for dt in rmacoll.DataType:
            self.assertEqual(lib.rmacoll_datatype_size(int(dt)), _buffers.DATATYPE_SIZES[dt])
            self.assertEqual(lib.rmacoll_datatype_name(int(dt)).decode(),
                             _buffers.DATATYPE_NAMES[dt])
        self.assertEqual(lib.rmacoll_datatype_size(_buffers.INVALID_DATATYPE), 0)
        for name in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                     "float32", "float64"):
            self.assertEqual(_buffers.to_datatype(np.dtype(name)).name, name.upper())
        self.assertEqual(_buffers.to_datatype("bfloat16"), rmacoll.DataType.BFLOAT16)
        for name in ("bool", "int16", "uint16", "complex64", "complex128"):
            self.assertEqual(_buffers.to_datatype(np.dtype(name)).name, name.upper())
        self.assertEqual(_buffers.to_datatype("float8_e4m3fn"), rmacoll.DataType.FLOAT8_E4M3)
        self.assertEqual(_buffers.to_datatype("float8_e5m2"), rmacoll.DataType.FLOAT8_E5M2)
        self.assertIsNone(_buffers.to_datatype(np.dtype("float128")))
        self.assertIsNone(_buffers.to_datatype(np.dtype("complex256")))

    def test_unique_id(self):
        uid = rmacoll.get_unique_id()
        self.assertEqual(len(bytes(uid)), _lib.UNIQUE_ID_BYTES)
        self.assertEqual(pickle.loads(pickle.dumps(uid)), uid)
        self.assertEqual(rmacoll.UniqueId.from_hex(uid.hex()), uid)
        uid2 = rmacoll.get_unique_id()
        self.assertNotEqual(uid2, uid)
        with self.assertRaises(ValueError):
            rmacoll.UniqueId(b"short")
        # serve the rendezvous these ids opened, so no root thread waits
        for u in (uid, uid2):
            with rmacoll.Communicator(0, 1, u) as c:
                self.assertEqual((c.rank, c.size), (0, 1))

    def test_library_search(self):
        code = "import rmacoll; print(rmacoll.library_path())"
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE),
                   RMACOLL_LIBRARY="/nonexistent/librmacoll.so")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("LibraryNotFoundError", p.stderr)
        self.assertIn("/nonexistent/librmacoll.so (no such file)", p.stderr)
        # a folder holding the library is accepted too
        env["RMACOLL_LIBRARY"] = os.path.dirname(rmacoll.library_path())
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.strip().startswith(env["RMACOLL_LIBRARY"]))


class TestOneRank(unittest.TestCase):
    """A one-rank communicator in this process: self exchange and errors
    that need no peer."""

    @classmethod
    def setUpClass(cls):
        cls.comm = rmacoll.Communicator(0, 1, rmacoll.get_unique_id())

    @classmethod
    def tearDownClass(cls):
        cls.comm.close()

    def test_register_one_rank(self):
        """One node: a registration is accepted and tracked (no network
        transport), calls register nothing; errors name the rank."""
        x = np.arange(64, dtype=np.float32)
        y = np.full(64, -1.0, dtype=np.float32)
        base = self.comm.stats()
        with self.comm.register(x) as rx, self.comm.register(y):
            st = self.comm.stats()
            self.assertEqual(st["memreg_handles"], base["memreg_handles"] + 2)
            self.assertEqual(st["memreg_bytes"], base["memreg_bytes"] + x.nbytes + y.nbytes)
            self.assertEqual((rx.address, rx.nbytes),
                             (x.__array_interface__["data"][0], x.nbytes))
            rmacoll.all_to_all_single(y, x, comm=self.comm)
            self.assertTrue(np.array_equal(x, y))
        st = self.comm.stats()
        self.assertEqual(st["memreg_handles"], base["memreg_handles"])
        self.assertEqual(st["memreg_buffers"], base["memreg_buffers"])
        self.assertEqual(st["call_registrations"], base["call_registrations"])
        with self.assertRaisesRegex(rmacoll.InvalidArgumentError, "rank 0: deregister"):
            rx.deregister()
        with self.assertRaisesRegex(rmacoll.InvalidArgumentError, "rank 0: register"):
            self.comm.register(np.zeros((4, 4))[:, ::2])
        with self.assertRaisesRegex(rmacoll.InvalidArgumentError, "empty"):
            self.comm.register((x.__array_interface__["data"][0], 0))

    def test_profiler_range(self):
        """Under torch's profiler a call is a record_function range named
        rmacoll:all_to_all_single (torch tensors on one rank)."""
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        x = torch.arange(12, dtype=torch.float32).reshape(6, 2)
        y = torch.full_like(x, -1.0)
        with torch.autograd.profiler.profile() as prof:
            rmacoll.all_to_all_single(y, x, comm=self.comm)
        self.assertTrue(torch.equal(x, y))
        names = [e.name for e in prof.function_events]
        self.assertEqual(names.count("rmacoll:all_to_all_single"), 1, names)
        rmacoll.all_to_all_single(y, x * 3, comm=self.comm)  # not profiling: no range
        self.assertTrue(torch.equal(x * 3, y))
        self.assertEqual(rmacoll.all_to_all_single.__name__, "all_to_all_single")
        self.assertIn("output_split_sizes", str(inspect.signature(rmacoll.all_to_all_single)))

    def test_self_exchange(self):
        x = np.arange(24, dtype=np.float64).reshape(6, 4)
        y = np.full_like(x, -1.0)
        self.assertIsNone(rmacoll.all_to_all_single(y, x, comm=self.comm))
        self.assertEqual(y.tobytes(), x.tobytes())
        w = rmacoll.all_to_all_single(y, x * 2, [6], [6], async_op=True, comm=self.comm)
        self.assertTrue(w.is_completed())
        self.assertTrue(w.wait())
        self.assertEqual(y.tobytes(), (x * 2).tobytes())

    def test_zero_dim_and_closed(self):
        x = np.zeros((), dtype=np.float32)
        with self.assertRaises(rmacoll.InvalidArgumentError) as cm:
            rmacoll.all_to_all_single(x, x, comm=self.comm)
        self.assertIn("0-d", str(cm.exception))
        c = rmacoll.Communicator(0, 1, rmacoll.get_unique_id())
        c.close()
        c.close()  # idempotent
        self.assertTrue(c.closed)
        with self.assertRaises(rmacoll.InvalidArgumentError):
            rmacoll.all_to_all_single(np.zeros(1), np.zeros(1), comm=c)

    def test_local_errors_one_rank(self):
        y = np.full(4, 7, dtype=np.float32)
        cases = [
            (np.arange(4, dtype=">f4"), y, rmacoll.DatatypeError, "input has dtype >f4, which rmacoll does not move"),
            (np.arange(4, dtype=np.float64), y, rmacoll.DatatypeError,
             "input has dtype float64 but output has dtype float32"),
            (np.arange(8, dtype=np.float32)[::2], y, rmacoll.InvalidArgumentError,
             "input is not contiguous"),
            # one rank: 5 rows split equally is all 5 to itself, 4 expected
            (np.arange(5, dtype=np.float32), y, rmacoll.MismatchError,
             "count mismatch: rank 0 sends 5 elements to rank 0, which expects 4"),
        ]
        for x, out, cls, text in cases:
            with self.assertRaises(cls) as cm:
                rmacoll.all_to_all_single(out, x, comm=self.comm)
            self.assertIn("rank 0: " + text, str(cm.exception))
            self.assertEqual(cm.exception.rank, 0)
            self.assertEqual(y.tolist(), [7.0] * 4)  # nothing written
        with self.assertRaises(rmacoll.InvalidArgumentError) as cm:
            rmacoll.all_to_all_single(y, np.zeros(4, np.float32), [4], [2.5], comm=self.comm)
        self.assertIn("non-integer", str(cm.exception))

    def test_device_split_errors_one_rank(self):
        """Device split sizes (CUDA split tensors, FakeCudaTensor here):
        every problem Python can see fails the call with the argument
        named, before any device work, and writes nothing."""
        x = np.arange(8, dtype=np.float32).reshape(4, 2)
        y = np.full((4, 2), 7, dtype=np.float32)
        F = FakeCudaTensor
        cases = [
            (dict(input_split_sizes=F((1,), "torch.int32")),
             "input_split_sizes is a CUDA tensor of dtype int32; it must be int64"),
            (dict(input_split_sizes=F((2,))),
             "input_split_sizes has shape (2,); it must be 1-d with one entry per rank of "
             "the group (1)"),
            (dict(input_split_sizes=F((1, 1))),
             "input_split_sizes has shape (1, 1); it must be 1-d"),
            (dict(input_split_sizes=F((1,)), output_split_sizes=[4]),
             "output_split_sizes is a list but input_split_sizes is a CUDA tensor"),
            (dict(input_split_sizes=F((1,)), output_split_sizes=np.array([4])),
             "output_split_sizes is an ndarray but input_split_sizes is a CUDA tensor"),
            (dict(input_split_sizes=F((1,)), output_split_sizes=F((1,), "torch.float32")),
             "output_split_sizes is a CUDA tensor of dtype float32; it must be int64"),
            (dict(input_split_sizes=[4], output_split_sizes=F((1,))),
             "output_split_sizes is a CUDA tensor but input_split_sizes is a list: device "
             "split sizes (no host synchronisation) need input_split_sizes as a CUDA int64 "
             "tensor"),
            (dict(input_split_sizes=None, out_splits=F((1,))),
             "out_splits is a CUDA tensor but input_split_sizes is None"),
            (dict(input_split_sizes=[4], output_split_sizes=[4], status=F((1,), "torch.int32")),
             "status is a CUDA tensor but input_split_sizes is a list"),
            (dict(input_split_sizes=F((1,)), output_split_sizes=F((1,)), out_splits=F((1,))),
             "out_splits is given with output_split_sizes: the received split sizes are "
             "produced only when output_split_sizes is None"),
            (dict(input_split_sizes=F((1,)), out_splits=F((1,), "torch.int32")),
             "out_splits is a CUDA tensor of dtype int32; it must be int64"),
            (dict(input_split_sizes=F((1,)), out_splits=np.zeros(1, np.int64)),
             "out_splits is an ndarray; it must be a CUDA int64 tensor"),
            (dict(input_split_sizes=F((1,)), status=F((1,), "torch.int64")),
             "status is a CUDA tensor of dtype int64; it must be int32"),
            (dict(input_split_sizes=F((1,)), status=F((0,), "torch.int32")),
             "status is empty; it must hold one int32"),
            # the split tensors are fine, the data is in host memory
            (dict(input_split_sizes=F((1,)), output_split_sizes=F((1,))),
             "input_split_sizes is a CUDA tensor but input and output are in host memory: "
             "device split sizes need CUDA tensors"),
        ]
        for kw, text in cases:
            with self.assertRaises(rmacoll.InvalidArgumentError, msg=text) as cm:
                rmacoll.all_to_all_single(y, x, comm=self.comm, **kw)
            self.assertIn("rank 0: " + text, str(cm.exception))
            self.assertEqual(cm.exception.rank, 0)
            self.assertEqual(y.tolist(), [[7.0, 7.0]] * 4)  # nothing written
        # the communicator still works, host split sizes as before
        rmacoll.all_to_all_single(y, x, [4], np.array([4]), comm=self.comm)
        self.assertEqual(y.tobytes(), x.tobytes())
        # nothing to report: no device-split call ran
        self.assertIsNone(self.comm.device_counts_check())
        self.assertIsNone(rmacoll.device_counts_check(comm=self.comm))

    def test_last_error_after_failure(self):
        x = np.zeros(4, dtype=np.int32)
        with self.assertRaises(rmacoll.CountOverflowError):
            self.comm.alltoallv(x, [-1], [0], x, [-1], [0])
        self.assertIn("sendcounts[0] = -1 is negative", self.comm.last_error)
        self.assertIn("rank 0", self.comm.last_error)
        # the communicator still works
        y = np.zeros(4, dtype=np.int32)
        self.comm.alltoallv(np.arange(4, dtype=np.int32), [4], [0], y, [4], [0])
        self.assertEqual(y.tolist(), [0, 1, 2, 3])


class TestRanks(unittest.TestCase):
    """Ranks as processes over virtual nodes."""

    def run_scenario(self, scenario, node_of, **kw):
        res = mprun.run(scenario, node_of, **kw)
        why = mprun.describe_failure(res)
        names = None
        for r in res:
            self.assertEqual(r["rc"], 0, why)
            self.assertIsNotNone(r["report"], why)
            checks = r["report"]["checks"]
            self.assertEqual(len(checks), EXPECTED_CHECKS[scenario], why)
            for c in checks:
                self.assertTrue(c["ok"], "rank %d: %s: %s" % (r["rank"], c["name"], c["detail"]))
            these = [c["name"] for c in checks]
            if names is None:
                names = these
            self.assertEqual(these, names)
        return res

    def test_data_one_node(self):
        self.run_scenario("data", [0, 0])

    def test_data_two_nodes(self):
        self.run_scenario("data", [0, 0, 1, 1])

    def test_data_uneven_nodes(self):
        self.run_scenario("data", [0, 1, 1])

    def test_abort(self):
        self.run_scenario("abort", [0, 0, 1, 1])

    def test_shrink(self):
        """The last of 4 ranks (2 virtual nodes) is killed after a call: the
        3 survivors shrink, exchange exact data, shrink again (healthy)."""
        res = mprun.run("shrink", [0, 0, 1, 1])
        why = mprun.describe_failure(res)
        self.assertEqual(res[3]["rc"], -9, why)  # SIGKILL, no report
        for r in res[:3]:
            self.assertEqual(r["rc"], 0, why)
            checks = r["report"]["checks"]
            self.assertEqual(len(checks), EXPECTED_CHECKS["shrink"], why)
            for c in checks:
                self.assertTrue(c["ok"], "rank %d: %s: %s" % (r["rank"], c["name"], c["detail"]))

    def test_raw_calls(self):
        self.run_scenario("raw", [0, 1])

    def test_prepared_calls_stay_exact(self):
        # three ranks: the scenario's one-sided split change needs them
        self.run_scenario("reuse", [0, 0, 1])

    def test_prepared_calls_stay_exact_one_node(self):
        self.run_scenario("reuse", [0, 0])

    def test_errors_every_rank(self):
        res = self.run_scenario("errors", [0, 0, 1])
        # the same exception class on every rank for every case
        per_case = {}
        for r in res:
            for c in r["report"]["checks"]:
                per_case.setdefault(c["name"], set()).add(c.get("cls"))
        for name, classes in per_case.items():
            self.assertEqual(len(classes), 1, "%s: %s" % (name, classes))

    def test_memreg_two_nodes(self):
        """Communicator.register: borrowed registrations on 2 nodes x 2."""
        self.run_scenario("memreg", [0, 0, 1, 1])

    def test_from_env(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.run_scenario("from_env", [0, 1], uid=False,
                          extra_env=lambda r: {"RANK": str(r), "WORLD_SIZE": "2",
                                               "MASTER_ADDR": "127.0.0.1",
                                               "MASTER_PORT": str(port - 1)})


if __name__ == "__main__":
    unittest.main(verbosity=2)
