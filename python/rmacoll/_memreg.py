"""User buffer registration (rmacoll_mem_register / rmacoll_mem_deregister,
the analogue of ncclCommRegister): Communicator.register(obj) and
TorchSegments, which registers every segment of torch's CUDA caching
allocator once.

A registration makes the calls whose send or receive buffer lies inside
it skip the per-call registration with the network transport (and keeps
the transport's registration of the region for its whole life); the
counters of Communicator.stats() say so (memreg_buffers against
call_registrations). It is local: not collective.
"""

import ctypes

from ._errors import InvalidArgumentError, error_for


def span_of(obj):
    """(address, nbytes) of a registrable object: a torch tensor, a numpy
    array (or anything with __array_interface__ / __cuda_array_interface__),
    or an (address, nbytes) pair of ints. Raises TypeError / ValueError."""
    if isinstance(obj, tuple) and len(obj) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in obj):
        return int(obj[0]), int(obj[1])
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):  # torch.Tensor
        if not obj.is_contiguous():
            raise ValueError("is a non-contiguous tensor: register its span as "
                             "(address, nbytes) instead")
        return int(obj.data_ptr()), int(obj.numel()) * int(obj.element_size())
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is None:
        iface = getattr(obj, "__array_interface__", None)
    if iface is None:
        raise TypeError("is a %s, not a tensor, an array or an (address, nbytes) pair"
                        % type(obj).__name__)
    flags = getattr(obj, "flags", None)
    if flags is not None and not (flags.c_contiguous or flags.f_contiguous):
        raise ValueError("is not contiguous: register its span as (address, nbytes) instead")
    if flags is None and iface.get("strides") is not None:
        raise ValueError("has strides: register its span as (address, nbytes) instead")
    nbytes = getattr(obj, "nbytes", None)
    if nbytes is None:
        typestr = iface["typestr"]
        nbytes = int(typestr[2:]) if typestr[2:].isdigit() else 0
        for d in iface["shape"]:
            nbytes *= int(d)
    data = iface.get("data")
    return int(data[0] if data else 0), int(nbytes)


class Registration:
    """A live registration of Communicator.register: address and nbytes
    of the region, deregister() (or use it as a context manager). It keeps
    a reference to the registered object, so the memory of a numpy array or
    tensor stays allocated while registered; for an (address, nbytes) pair
    the caller keeps the memory alive (freeing it while registered is
    undefined, as with ncclCommRegister)."""

    __slots__ = ("_comm", "_h", "address", "nbytes", "_keep", "__weakref__")

    def __init__(self, comm, handle, address, nbytes, keep):
        self._comm = comm
        self._h = handle
        self.address = address
        self.nbytes = nbytes
        self._keep = keep

    @property
    def live(self):
        return self._h is not None

    def deregister(self):
        """Releases the registration (rmacoll_mem_deregister). No call whose
        buffers lie in it may be in flight. A second deregister raises
        InvalidArgumentError naming the rank (as the C library does)."""
        comm = self._comm
        if self._h is None:
            raise InvalidArgumentError("rank %d: deregister: the registration of %d bytes at "
                                       "0x%x is not live (deregistered already, or its "
                                       "communicator was closed)"
                                       % (comm.rank, self.nbytes, self.address),
                                       rank=comm.rank)
        h, self._h = self._h, None
        self._keep = None
        comm._memregs.discard(self)
        st = comm._lib.rmacoll_mem_deregister(comm._handle(), h)
        if st != 0:
            raise error_for(st, "rank %d: rmacoll_mem_deregister: %s (the library's log "
                            "says why)" % (comm.rank, _status(comm, st)), rank=comm.rank)

    def _forget(self):
        """The communicator was closed: its destroy released the rest."""
        self._h = None
        self._keep = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._h is not None:
            self.deregister()
        return False

    def __repr__(self):
        return "<rmacoll.Registration %d bytes at 0x%x%s>" % (
            self.nbytes, self.address, "" if self._h is not None else " deregistered")


def _status(comm, st):
    s = comm._lib.rmacoll_status_string(st)
    return s.decode() if s else str(st)


def register(comm, obj):
    """Communicator.register's body."""
    try:
        addr, nbytes = span_of(obj)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError("rank %d: register: the object %s" % (comm.rank, e),
                                   rank=comm.rank) from None
    if addr == 0 or nbytes <= 0:
        raise InvalidArgumentError("rank %d: register: the object is empty (address 0x%x, "
                                   "%d bytes): nothing to register" % (comm.rank, addr, nbytes),
                                   rank=comm.rank)
    lib = comm._lib
    if getattr(lib, "rmacoll_mem_register", None) is None:
        from ._errors import UnsupportedError
        raise UnsupportedError("rank %d: librmacoll has no rmacoll_mem_register (older than "
                               "user registration)" % comm.rank, rank=comm.rank)
    h = ctypes.c_void_p()
    st = lib.rmacoll_mem_register(comm._handle(), ctypes.c_void_p(addr), ctypes.c_size_t(nbytes),
                                  ctypes.byref(h))
    if st != 0:
        raise error_for(st, "rank %d: rmacoll_mem_register(%d bytes at 0x%x): %s (the "
                        "library's log says why)" % (comm.rank, nbytes, addr, _status(comm, st)),
                        rank=comm.rank)
    r = Registration(comm, h, addr, nbytes, None if isinstance(obj, tuple) else obj)
    comm._memregs.add(r)
    return r


class TorchSegments:
    """Registers every segment of torch's CUDA caching allocator with a
    communicator once (ProcessGroupNCCL's register_segment idea, over the
    public torch.cuda.memory_snapshot()).

        segs = rmacoll.TorchSegments(comm)      # registers what exists now
        ...
        segs.update()   # after allocations: registers new segments only
        segs.empty_cache()   # instead of torch.cuda.empty_cache()
        segs.close()         # deregisters everything

    A tensor from the caching allocator lies inside one segment, so once
    its segment is registered, calls on it register nothing per call
    (Communicator.stats(): memreg_buffers). update() is cheap when nothing
    changed only in the sense of one memory_snapshot(); call it after the
    allocator grew (e.g. every few steps, or when stats() shows
    call_registrations rising). A segment the allocator released
    (torch.cuda.empty_cache()) must be deregistered BEFORE it is freed:
    use empty_cache() here, which deregisters every segment, empties the
    cache and registers the segments that stayed. A segment found gone by
    update() is deregistered late (its memory already freed: undefined for
    the transport; a RuntimeWarning). A segment that grew in place
    (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True keeps its start) is
    registered again at its new size, without a warning.

    snapshot: a callable returning the segments as torch.cuda.memory_snapshot
    does (dicts with "address", "total_size", "device"); default
    torch.cuda.memory_snapshot. device: only segments of this CUDA ordinal
    (None: every device's). Not run on the CPU-only test machine with
    real CUDA memory; its bookkeeping is tested with host memory.
    """

    def __init__(self, comm, device=None, snapshot=None):
        self._comm = comm
        self._device = device
        self._snapshot = snapshot
        self._regs = {}  # (address, total_size) -> Registration
        self.update()

    def _segments(self):
        if self._snapshot is not None:
            segs = self._snapshot()
        else:
            import torch
            segs = torch.cuda.memory_snapshot()
        out = []
        for s in segs:
            if self._device is not None and int(s.get("device", self._device)) != self._device:
                continue
            out.append((int(s["address"]), int(s["total_size"])))
        return out

    def update(self):
        """Registers the segments not yet registered, deregisters the ones
        gone; returns the number registered now."""
        now = set(self._segments())
        starts = {a for a, _ in now}
        gone = [k for k in self._regs if k not in now]
        for k in gone:
            if k[0] not in starts:
                # (a segment that grew in place, expandable_segments, keeps
                # its start and was not freed: no warning)
                import warnings
                warnings.warn("rank %d: caching-allocator segment of %d bytes at 0x%x was "
                              "freed while registered (use TorchSegments.empty_cache())"
                              % (self._comm.rank, k[1], k[0]), RuntimeWarning, stacklevel=2)
            self._regs.pop(k).deregister()
        added = 0
        for k in sorted(now):
            if k not in self._regs:
                self._regs[k] = register(self._comm, k)
                added += 1
        return added

    @property
    def segments(self):
        """{(address, nbytes): Registration} of the registered segments."""
        return dict(self._regs)

    def empty_cache(self):
        """torch.cuda.empty_cache() with the registrations out of the way:
        deregisters every segment, empties the cache, registers what is
        left."""
        self.close()
        if self._snapshot is None:
            import torch
            torch.cuda.empty_cache()
        self.update()

    def close(self):
        """Deregisters every segment registered here."""
        regs, self._regs = self._regs, {}
        for r in regs.values():
            if r.live:
                r.deregister()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
