// ce_batch_bench.cu - what k small copy-engine copies cost on one GPU, the
// way a relay submits its forwards (issue 30 item 2; the simulator's
// nvlink.copy_us default, 3.7 us, comes from it: docs/sim.md).
//
// For k copies of b bytes each (disjoint device buffers), median of R
// repetitions, wall time from the first submission to the end of a
// cudaStreamSynchronize (what run_host.c's CE step pays):
//   one:    k cudaMemcpyAsync on one stream
//   batch:  one cudaMemcpyBatchAsync of k copies (CUDA 12.8+)
//   multi4: k cudaMemcpyAsync spread over 4 streams, joined by events
//   kern64: the nvlink_kernel transport's way, ceil(k / 64) kernel launches
//           of a descriptor passed by value (64 entries, one block of 512
//           threads per entry, as transports/nvlink_kernel for puts of at
//           most 16 KiB), for the simulator's nvlink.kernel_us
// and the host time of the submission alone. Prints a table (us).
// Build: nvcc -O2 -o ce_batch_bench ce_batch_bench.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                      \
    do {                                                                           \
        cudaError_t e_ = (x);                                                      \
        if (e_ != cudaSuccess) {                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,             \
                    cudaGetErrorString(e_));                                       \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static double now_us()
{
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

enum { ONE = 0, BATCH = 1, MULTI = 2, KERN = 3, NMETHODS = 4 };
static const int NSTREAMS = 4;

struct desc {
    int n;
    const char *src[64];
    char *dst[64];
    size_t bytes[64];
};

// block e copies entry e, 16 bytes per thread per step where aligned
__global__ void scatter(const desc dd)
{
    int e = blockIdx.x;
    if (e >= dd.n) {
        return;
    }
    size_t b = dd.bytes[e], n16 = b / 16;
    const uint4 *s = (const uint4 *)dd.src[e];
    uint4 *d = (uint4 *)dd.dst[e];
    for (size_t i = threadIdx.x; i < n16; i += blockDim.x) {
        d[i] = s[i];
    }
    for (size_t i = n16 * 16 + threadIdx.x; i < b; i += blockDim.x) {
        dd.dst[e][i] = dd.src[e][i];
    }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    const int ks[] = {1, 2, 8, 16, 56, 128, 512};
    const size_t bs[] = {64, 1024, 8192, 65536, 1 << 20};
    size_t maxk = 512, maxb = 1 << 20;
    char *src, *dst;
    cudaStream_t st[NSTREAMS];
    cudaEvent_t ev[NSTREAMS];

    CK(cudaSetDevice(0));
    CK(cudaMalloc(&src, maxk * maxb));
    CK(cudaMalloc(&dst, maxk * maxb));
    CK(cudaMemset(src, 1, maxk * maxb));
    for (int i = 0; i < NSTREAMS; i++) {
        CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    }
    std::vector<void *> d(maxk);
    std::vector<const void *> s(maxk);
    std::vector<size_t> sz(maxk);
    cudaMemcpyAttributes attr = {};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t aidx = 0;

    printf("%6s %8s | %9s %9s %9s %9s | %9s %9s %9s %9s\n", "k", "bytes", "one", "batch",
           "multi4", "kern64", "sub_one", "sub_batch", "sub_multi", "sub_kern");
    for (size_t b : bs) {
        for (int k : ks) {
            if ((size_t)k * b > maxk * maxb) {
                continue;
            }
            for (int i = 0; i < k; i++) {
                d[i] = dst + (size_t)i * b;
                s[i] = src + (size_t)i * b;
                sz[i] = b;
            }
            double med[NMETHODS], sub[NMETHODS];
            for (int m = 0; m < NMETHODS; m++) {
                std::vector<double> t(reps), u(reps);
                for (int r = 0; r < reps + 5; r++) {
                    double t0 = now_us(), t1;
                    if (m == ONE) {
                        for (int i = 0; i < k; i++) {
                            CK(cudaMemcpyAsync(d[i], s[i], b, cudaMemcpyDeviceToDevice, st[0]));
                        }
                        t1 = now_us();
                    } else if (m == BATCH) {
                        CK(cudaMemcpyBatchAsync(d.data(), s.data(), sz.data(), (size_t)k, &attr,
                                                &aidx, 1, st[0]));
                        t1 = now_us();
                    } else if (m == KERN) {
                        for (int i0 = 0; i0 < k; i0 += 64) {
                            desc dd;
                            dd.n = std::min(64, k - i0);
                            for (int e = 0; e < dd.n; e++) {
                                dd.src[e] = (const char *)s[i0 + e];
                                dd.dst[e] = (char *)d[i0 + e];
                                dd.bytes[e] = b;
                            }
                            scatter<<<dd.n, 512, 0, st[0]>>>(dd);
                            CK(cudaGetLastError());
                        }
                        t1 = now_us();
                    } else {
                        CK(cudaEventRecord(ev[0], st[0]));
                        for (int j = 1; j < NSTREAMS; j++) {
                            CK(cudaStreamWaitEvent(st[j], ev[0], 0));
                        }
                        for (int i = 0; i < k; i++) {
                            CK(cudaMemcpyAsync(d[i], s[i], b, cudaMemcpyDeviceToDevice,
                                               st[i % NSTREAMS]));
                        }
                        for (int j = 1; j < NSTREAMS; j++) {
                            CK(cudaEventRecord(ev[j], st[j]));
                            CK(cudaStreamWaitEvent(st[0], ev[j], 0));
                        }
                        t1 = now_us();
                    }
                    CK(cudaStreamSynchronize(st[0]));
                    double t2 = now_us();
                    if (r >= 5) {
                        t[r - 5] = t2 - t0;
                        u[r - 5] = t1 - t0;
                    }
                }
                std::sort(t.begin(), t.end());
                std::sort(u.begin(), u.end());
                med[m] = t[reps / 2];
                sub[m] = u[reps / 2];
            }
            printf("%6d %8zu | %9.1f %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f %9.1f\n", k, b,
                   med[0], med[1], med[2], med[3], sub[0], sub[1], sub[2], sub[3]);
        }
    }
    return 0;
}
