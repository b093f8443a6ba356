"""Datatypes and buffer descriptions: what a torch tensor, a numpy array or
a __cuda_array_interface__ object (cupy, numba) looks like to the C API
(address, rows, elements per row, datatype, device, stream).

No torch or numpy import here at module load: each is touched only when an
object of its kind is passed.
"""

import ctypes
import enum


class DataType(enum.IntEnum):
    """rmacoll_datatype_t (values are stable, see include/rmacoll.h)."""
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9
    BOOL = 10
    INT16 = 11
    UINT16 = 12
    COMPLEX64 = 13
    COMPLEX128 = 14
    FLOAT8_E4M3 = 15
    FLOAT8_E5M2 = 16


# element sizes, bytes
DATATYPE_SIZES = {
    DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4,
    DataType.INT64: 8, DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.BFLOAT16: 2,
    DataType.FLOAT32: 4, DataType.FLOAT64: 8, DataType.BOOL: 1, DataType.INT16: 2,
    DataType.UINT16: 2, DataType.COMPLEX64: 8, DataType.COMPLEX128: 16,
    DataType.FLOAT8_E4M3: 1, DataType.FLOAT8_E5M2: 1,
}

# names as rmacoll_datatype_name gives them; numpy and torch use the same
# spellings ("float32", torch.float32 prints "torch.float32"; numpy's
# bfloat16 comes from ml_dtypes)
_BY_NAME = {
    "int8": DataType.INT8, "uint8": DataType.UINT8, "int32": DataType.INT32,
    "uint32": DataType.UINT32, "int64": DataType.INT64, "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16, "bfloat16": DataType.BFLOAT16,
    "float32": DataType.FLOAT32, "float64": DataType.FLOAT64,
    "bool": DataType.BOOL, "int16": DataType.INT16, "uint16": DataType.UINT16,
    "complex64": DataType.COMPLEX64, "complex128": DataType.COMPLEX128,
    "float8_e4m3": DataType.FLOAT8_E4M3, "float8_e5m2": DataType.FLOAT8_E5M2,
}
DATATYPE_NAMES = {v: k for k, v in _BY_NAME.items()}
# torch and ml_dtypes spell the finite-only E4M3 "float8_e4m3fn"
_BY_NAME["float8_e4m3fn"] = DataType.FLOAT8_E4M3

# A datatype value the library rejects with RMACOLL_ERR_DATATYPE on every
# rank (one past the last known type); see all_to_all_single's error rule.
INVALID_DATATYPE = len(DataType)


def dtype_name(obj):
    """The element-type name of a numpy/torch dtype or a DataType/str."""
    if isinstance(obj, DataType):
        return DATATYPE_NAMES[obj]
    if isinstance(obj, str):
        return obj[6:] if obj.startswith("torch.") else obj
    name = getattr(obj, "name", None)  # numpy dtype
    if isinstance(name, str) and not type(obj).__module__.startswith("torch"):
        return name
    return str(obj).replace("torch.", "")  # torch.dtype


def to_datatype(obj):
    """DataType for a DataType, name, numpy dtype or torch dtype, or None
    when rmacoll has no such type (float8_e4m3fnuz, quantised types ...)."""
    if isinstance(obj, DataType):
        return obj
    if isinstance(obj, int) and not isinstance(obj, bool):
        try:
            return DataType(obj)
        except ValueError:
            return None
    return _BY_NAME.get(dtype_name(obj))


class BufferInfo:
    """One array as the C API sees it.

    ptr: address (int, 0 allowed for an empty array); rows: size of dim 0;
    row_elems: elements per row (product of the other dims); dtype: DataType
    or None; dtype_text: the array's own dtype spelling; device: "cpu" or
    "cuda"; device_index: CUDA ordinal or None; contiguous, writable: bools;
    torch_device: the torch.device of a tensor, else None; kind: "torch",
    "array" (numpy, __array_interface__) or "cuda_array".
    """

    __slots__ = ("ptr", "rows", "row_elems", "dtype", "dtype_text", "device",
                 "device_index", "contiguous", "writable", "torch_device", "kind")

    def __init__(self, ptr, rows, row_elems, dtype, dtype_text, device, device_index,
                 contiguous, writable, torch_device, kind):
        self.ptr = ptr
        self.rows = rows
        self.row_elems = row_elems
        self.dtype = dtype
        self.dtype_text = dtype_text
        self.device = device
        self.device_index = device_index
        self.contiguous = contiguous
        self.writable = writable
        self.torch_device = torch_device
        self.kind = kind


def _prod(dims):
    p = 1
    for d in dims:
        p *= int(d)
    return p


# dtype object (numpy or torch) -> (DataType or None, text); dtype.name is slow
_DTYPES = {}


def _dtype_of(dt):
    r = _DTYPES.get(dt)
    if r is None:
        # a byte-swapped numpy dtype (">f4" here) is not the datatype it names
        native = getattr(dt, "isnative", True)
        r = (to_datatype(dt) if native else None, str(dt))
        _DTYPES[dt] = r
    return r


# torch.device -> (type, index); device.type is slow
_DEVICES = {}


def _torch_info(obj):
    shape = obj.shape
    if len(shape) == 0:
        raise ValueError("is a 0-d tensor; all_to_all_single splits dim 0")
    dt, text = _dtype_of(obj.dtype)
    dev = obj.device
    kind = _DEVICES.get(dev)
    if kind is None:
        kind = _DEVICES[dev] = (dev.type, dev.index)
    return BufferInfo(obj.data_ptr(), shape[0], _prod(shape[1:]), dt, text, kind[0],
                      kind[1], obj.is_contiguous(), True, dev, "torch")


def _numpy_info(obj):
    shape = obj.shape
    if len(shape) == 0:
        raise ValueError("is a 0-d array; all_to_all_single splits dim 0")
    dt, text = _dtype_of(obj.dtype)
    fl = obj.flags
    return BufferInfo(numpy_address(obj), shape[0], _prod(shape[1:]), dt,
                      text, "cpu", None, fl.c_contiguous, fl.writeable, None, "array")


def _iface_info(obj):
    cai = getattr(obj, "__cuda_array_interface__", None)
    ai = None if cai is not None else getattr(obj, "__array_interface__", None)
    iface = cai if cai is not None else ai
    if iface is None:
        raise TypeError("is a %s, not a tensor or array (torch.Tensor, numpy.ndarray, "
                        "or an object with __cuda_array_interface__)" % type(obj).__name__)
    shape = tuple(iface["shape"])
    if len(shape) == 0:
        raise ValueError("is a 0-d array; all_to_all_single splits dim 0")
    ptr, readonly = iface["data"] if iface.get("data") is not None else (0, False)
    typestr = iface["typestr"]
    strides = iface.get("strides")
    dtype_text = typestr
    dt = None
    try:
        import numpy as np
        npdt = getattr(obj, "dtype", None)
        npdt = np.dtype(npdt) if npdt is not None else np.dtype(typestr)
        dt, dtype_text = _dtype_of(npdt)
    except (ImportError, TypeError):
        pass
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    contiguous = True
    if strides is not None:
        expect = itemsize
        for dim, st in zip(reversed(shape), reversed(strides)):
            if dim != 1 and st != expect:
                contiguous = False
            expect *= dim
    return BufferInfo(int(ptr or 0), int(shape[0]), _prod(shape[1:]), dt, dtype_text,
                      "cuda" if cai is not None else "cpu", None, contiguous, not readonly,
                      None, "cuda_array" if cai is not None else "array")


def numpy_address(a, _from_buffer=ctypes.c_char.from_buffer, _addressof=ctypes.addressof):
    """The data address of a C-contiguous numpy array: through the buffer
    protocol (a fifth of __array_interface__'s time, which builds a dict),
    else (read-only or empty arrays) from __array_interface__."""
    try:
        return _addressof(_from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.__array_interface__["data"][0]


_HANDLERS = {}  # type -> describe function


def _handler(t):
    mod = t.__module__
    if mod.startswith("torch") and hasattr(t, "data_ptr") and hasattr(t, "is_contiguous"):
        return _torch_info
    if mod == "numpy" and t.__name__ in ("ndarray", "memmap", "matrix") or any(
            b.__module__ == "numpy" and b.__name__ == "ndarray" for b in t.__mro__):
        return _numpy_info
    return _iface_info


def address_and_dtype(obj):
    """(address, DataType or None) of a numpy array or torch tensor with a
    dim 0 (what Communicator.alltoallv reads of its buffers), else of
    describe(obj) (its errors)."""
    h = _HANDLERS.get(type(obj))
    if h is _numpy_info or h is _torch_info:
        if obj.ndim:
            dt = _dtype_of(obj.dtype)[0]
            return (numpy_address(obj) if h is _numpy_info else obj.data_ptr()), dt
    info = describe(obj)
    return info.ptr, info.dtype


def describe(obj):
    """BufferInfo of a torch tensor, numpy array, or an object with
    __cuda_array_interface__ / __array_interface__. Raises TypeError for
    anything else and ValueError for a 0-d array (no dim 0 to split)."""
    t = type(obj)
    h = _HANDLERS.get(t)
    if h is None:
        h = _handler(t)
        _HANDLERS[t] = h
    return h(obj)


def split_list(sizes, what):
    """Split sizes (None, list/tuple of ints, numpy array, torch tensor) as
    a list of Python ints, or None for 'equal split'. Raises ValueError /
    TypeError with a message starting with `what`."""
    if sizes is None:
        return None
    if type(sizes) is list and all(type(s) is int for s in sizes):
        return sizes if sizes else None  # the common case, read only
    if hasattr(sizes, "tolist"):  # numpy array or torch tensor (a CUDA one syncs)
        sizes = sizes.tolist()
    try:
        out = [int(s) for s in sizes]
    except TypeError:
        raise TypeError("%s must be a list of ints or a 1-d tensor/array, got %r"
                        % (what, type(sizes).__name__)) from None
    for s, o in zip(sizes, out):
        if isinstance(s, float) and s != o:
            raise TypeError("%s holds a non-integer %r" % (what, s))
    # torch treats [] as None (equal splits)
    return out if out else None
