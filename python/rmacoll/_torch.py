"""torch.distributed glue: communicators for process groups. torch is
imported only here, and only when a group is used."""

import threading

from ._errors import InvalidArgumentError, UnsupportedError

_lock = threading.Lock()
_group_comms = {}  # ProcessGroup -> Communicator


def _dist():
    try:
        import torch.distributed as dist
    except ImportError:
        raise InvalidArgumentError("no communicator: pass comm=rmacoll.Communicator(...), "
                                   "or install torch and use a torch.distributed group") \
            from None
    return dist


def _global_rank(dist, group, group_rank):
    if hasattr(dist, "get_global_rank"):  # torch >= 2.0
        return dist.get_global_rank(group, group_rank)
    return dist.distributed_c10d._get_global_rank(group, group_rank)


def comm_from_group(cls, group, node_key=None, bootstrap="unique_id"):
    from ._comm import get_unique_id
    dist = _dist()
    if not dist.is_initialized():
        raise InvalidArgumentError("torch.distributed is not initialised "
                                   "(init_process_group) and no comm= was given")
    g = group if group is not None else dist.group.WORLD
    if _backend_group(g):
        raise UnsupportedError("the group is an rmacoll backend group (init_process_group("
                               "backend=\"rmacoll\")): it has its communicator already, "
                               "group.communicator; rmacoll.all_to_all_single(group=...) "
                               "uses it")
    rank = dist.get_rank(g)
    nranks = dist.get_world_size(g)
    if bootstrap == "nccl":
        return _comm_from_nccl_group(cls, dist, g)
    if bootstrap != "unique_id":
        raise ValueError("bootstrap must be 'unique_id' or 'nccl', got %r" % (bootstrap,))
    # rank 0 of the group makes the id; a failure there must not leave the
    # others waiting in the broadcast, so the exception travels instead
    obj = [None]
    if rank == 0:
        try:
            obj[0] = get_unique_id()
        except Exception as e:  # noqa: BLE001 - re-raised on every rank below
            obj[0] = e
    dist.broadcast_object_list(obj, src=_global_rank(dist, g, 0), group=g)
    if isinstance(obj[0], Exception):
        raise obj[0]
    return cls(rank, nranks, obj[0], node_key=node_key)


def _comm_from_nccl_group(cls, dist, g):
    import torch
    try:
        backend = g._get_backend(torch.device("cuda"))
    except Exception as e:  # noqa: BLE001 - not an NCCL group
        raise UnsupportedError("bootstrap='nccl': the group has no CUDA backend (%s)" % e) \
            from None
    ptr_fn = getattr(backend, "_comm_ptr", None)
    if ptr_fn is None:
        raise UnsupportedError("bootstrap='nccl': this torch's %s does not expose its NCCL "
                               "communicator (_comm_ptr); use bootstrap='unique_id'"
                               % type(backend).__name__)
    # NCCL communicators are made lazily: one collective makes this device's
    dist.barrier(group=g, device_ids=[torch.cuda.current_device()])
    return cls.from_nccl(ptr_fn())


def communicator_for_group(group=None):
    """The rmacoll Communicator of a torch.distributed group (None: the
    default group), made on first use; collective on that first use."""
    dist = _dist()
    if not dist.is_initialized():
        raise InvalidArgumentError("torch.distributed is not initialised "
                                   "(init_process_group) and no comm= was given")
    g = group if group is not None else dist.group.WORLD
    with _lock:
        c = _group_comms.get(g)
    if _backend_group(g):
        # the backend's own communicator (torch_backend), never a second one
        if c is None or c.closed:
            raise InvalidArgumentError("the rmacoll communicator of %r is closed "
                                       "(destroy_group_communicators or group.close())" % g)
        return c
    if c is None or c.closed:
        from ._comm import Communicator
        c = Communicator.from_torch_group(g)
        with _lock:
            _group_comms[g] = c
    return c


def _backend_group(g):
    """Whether g is a ProcessGroupRmacoll (no torch_backend import when it
    was never imported: then there is none)."""
    import sys
    tb = sys.modules.get("rmacoll.torch_backend")
    return tb is not None and isinstance(g, tb.ProcessGroupRmacoll)


def existing_communicator(group=None):
    """The Communicator all_to_all_single made for `group` (None: the
    default group), or None when it made none (no collective, no torch
    import when torch.distributed is not loaded)."""
    import sys
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_initialized():
        return None
    g = group if group is not None else dist.group.WORLD
    with _lock:
        c = _group_comms.get(g)
    return c if c is not None and not c.closed else None


def destroy_group_communicators(group=None):
    """Closes the communicators all_to_all_single made for groups
    (collective over each group): the one of `group`, or every one when
    group is None. Call before torch.distributed.destroy_process_group."""
    with _lock:
        if group is None:
            comms = list(_group_comms.values())
            _group_comms.clear()
        else:
            c = _group_comms.pop(group, None)
            comms = [c] if c is not None else []
    for c in comms:
        c.close()
