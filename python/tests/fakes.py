"""Stand-ins for torch CUDA tensors on a machine without CUDA: just enough
(is_cuda, dtype, shape, device, data_ptr ...) for all_to_all_single's
checks of device split sizes, which must fail every rank's call before
any device work (so no real CUDA tensor is needed to test them)."""

import types


class FakeCudaTensor:
    is_cuda = True

    def __init__(self, shape, dtype="torch.int64", index=0):
        self.shape = tuple(shape)
        self.dtype = dtype  # read by name, as torch.int64 prints "torch.int64"
        self.device = types.SimpleNamespace(type="cuda", index=index)

    def data_ptr(self):
        return 0x1000  # never dereferenced: the call fails before the device

    def dim(self):
        return len(self.shape)

    def numel(self):
        p = 1
        for d in self.shape:
            p *= d
        return p

    def is_contiguous(self):
        return True
