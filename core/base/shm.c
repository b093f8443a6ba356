/*
 * shm.c - named POSIX shared-memory segments for node peers' control
 * windows: create (owner), attach with retries (peers), unlink, destroy.
 */
#include "core/base/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"

#include "core/base/log.h"

static void shm_log(rmacoll_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void shm_log(rmacoll_log_level_t level, const char *fmt, ...)
{
    rmacoll__logger_t lg;
    va_list ap;

    rmacoll__logger_default(&lg);
    va_start(ap, fmt);
    rmacoll__vlog(&lg, level, RMACOLL_LOG_SUBSYS_CORE, fmt, ap);
    va_end(ap);
}

static int shm_name_ok(const char *name)
{
    size_t n;

    if (name == NULL || name[0] != '/') {
        return 0;
    }
    n = strlen(name);
    return n > 1 && n < sizeof(((rmacoll__shm_t *)0)->name) &&
           strchr(name + 1, '/') == NULL;
}

/* errno of shm_open/ftruncate/fallocate/mmap -> status, with the cause. */
static rmacoll_status_t shm_status(int err, const char **cause)
{
    switch (err) {
    case ENOSPC:
    case EFBIG:
    case ENOMEM:
    case EDQUOT:
        *cause = "/dev/shm is full or too small";
        return RMACOLL_ERR_NO_MEMORY;
    case EMFILE:
    case ENFILE:
        *cause = "too many open files";
        return RMACOLL_ERR_NO_MEMORY;
    case ENOSYS:
    case ENOENT:
    case ENOTDIR:
        *cause = "/dev/shm is not mounted";
        return RMACOLL_ERR_NO_DEVICE;
    case EACCES:
    case EPERM:
    case EROFS:
        *cause = "/dev/shm is not writable";
        return RMACOLL_ERR_NO_DEVICE;
    case EEXIST:
        *cause = "the name already exists (a stale segment of an earlier run? "
                 "remove it from /dev/shm)";
        return RMACOLL_ERR_INVALID_ARG;
    default:
        *cause = strerror(err);
        return RMACOLL_ERR_NO_DEVICE;
    }
}

int rmacoll__shm_sweep_stale(uint64_t magic, size_t pid_off)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int removed = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        const char *p = e->d_name;
        char name[300];
        uint64_t head[2] = {0, 0};
        struct stat sb;
        int fd, hex = 0;

        if (strncmp(p, "rmacoll-", 8) != 0) {
            continue;
        }
        for (p += 8; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++) {
            hex++;
        }
        if (hex != 16 || *p != '-') {
            continue; /* not a control window (e.g. a libfabric region) */
        }
        snprintf(name, sizeof(name), "/%s", e->d_name);
        fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
        if (fd < 0) {
            continue;
        }
        if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= pid_off + 8 &&
            pread(fd, &head[0], 8, 0) == 8 && pread(fd, &head[1], 8, (off_t)pid_off) == 8 &&
            head[0] == magic && head[1] > 0 && head[1] < (1u << 22) &&
            (pid_t)head[1] != getpid() && kill((pid_t)head[1], 0) != 0 && errno == ESRCH &&
            shm_unlink(name) == 0) {
            shm_log(RMACOLL_LOG_INFO, "shm: removed control window %s left by process %"
                    PRIu64 ", which has exited", name, head[1]);
            removed++;
        }
        close(fd);
    }
    closedir(d);
    return removed;
}

int rmacoll__shm_tag(const char **tag)
{
    const char *v = getenv("RMACOLL_SHM_TAG");
    size_t n;

    *tag = v != NULL ? v : "";
    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    n = strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    return (v[n] == '\0' && n <= RMACOLL__SHM_TAG_MAX) ? 0 : -1;
}

void rmacoll__shm_name(uint64_t comm_id, int rank, char *name, size_t len)
{
    snprintf(name, len, "/rmacoll-%016" PRIx64 "-%d", comm_id, rank);
}

rmacoll_status_t rmacoll__shm_create(const char *name, size_t bytes,
                                     rmacoll__shm_t *seg)
{
    const char *cause;
    const char *step;
    rmacoll_status_t st;
    int fd, err;
    void *addr;

    if (seg == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    memset(seg, 0, sizeof(*seg));
    if (!shm_name_ok(name) || bytes == 0 || bytes > (size_t)INT64_MAX) {
        shm_log(RMACOLL_LOG_ERROR, "shm: bad segment name '%s' or size %zu bytes",
                name ? name : "(null)", bytes);
        return RMACOLL_ERR_INVALID_ARG;
    }
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = errno;
        st = shm_status(err, &cause);
        shm_log(RMACOLL_LOG_ERROR, "shm: cannot create segment %s of %zu bytes: %s",
                name, bytes, cause);
        return st;
    }
    step = "ftruncate";
    err = ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
    if (err == 0) {
        /* Reserve the pages now: tmpfs would otherwise fail with SIGBUS
         * on first touch when /dev/shm is full. */
        step = "posix_fallocate";
        err = posix_fallocate(fd, 0, (off_t)bytes);
        if (err == EINVAL || err == EOPNOTSUPP) {
            err = 0; /* file system cannot reserve: keep the sparse file */
        }
    }
    if (err == 0) {
        step = "mmap";
        addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        err = (addr == MAP_FAILED) ? errno : 0;
    }
    close(fd);
    if (err != 0) {
        st = shm_status(err, &cause);
        shm_log(RMACOLL_LOG_ERROR, "shm: cannot size segment %s to %zu bytes (%s): %s",
                name, bytes, step, cause);
        shm_unlink(name);
        return st;
    }
    seg->addr = addr;
    seg->bytes = bytes;
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    seg->owner = 1;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__shm_attach(const char *name, size_t bytes,
                                     uint64_t timeout_ms, rmacoll__shm_t *seg)
{
    uint64_t deadline, now;
    unsigned nap_ms = 1;
    off_t seen = -1;
    const char *cause;
    rmacoll_status_t st;

    if (seg == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    memset(seg, 0, sizeof(*seg));
    if (!shm_name_ok(name) || bytes == 0 || bytes > (size_t)INT64_MAX) {
        shm_log(RMACOLL_LOG_ERROR, "shm: bad segment name '%s' or size %zu bytes",
                name ? name : "(null)", bytes);
        return RMACOLL_ERR_INVALID_ARG;
    }
    now = rmacoll__now_ms();
    deadline = (timeout_ms > UINT64_MAX - now) ? UINT64_MAX : now + timeout_ms;
    for (;;) {
        int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        if (fd >= 0) {
            struct stat sb;
            if (fstat(fd, &sb) != 0) {
                int err = errno;
                close(fd);
                st = shm_status(err, &cause);
                shm_log(RMACOLL_LOG_ERROR, "shm: cannot stat segment %s: %s", name, cause);
                return st;
            }
            seen = sb.st_size;
            if ((uint64_t)sb.st_size >= (uint64_t)bytes) {
                void *addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                int err = (addr == MAP_FAILED) ? errno : 0;
                close(fd);
                if (err != 0) {
                    st = shm_status(err, &cause);
                    shm_log(RMACOLL_LOG_ERROR, "shm: cannot map segment %s of %zu bytes: %s",
                            name, bytes, cause);
                    return st;
                }
                seg->addr = addr;
                seg->bytes = bytes;
                snprintf(seg->name, sizeof(seg->name), "%s", name);
                seg->owner = 0;
                return RMACOLL_SUCCESS;
            }
            close(fd);
        } else if (errno != ENOENT && errno != EINTR) {
            int err = errno;
            st = shm_status(err, &cause);
            shm_log(RMACOLL_LOG_ERROR, "shm: cannot open segment %s: %s", name, cause);
            return st;
        }
        now = rmacoll__now_ms();
        if (now >= deadline) {
            break;
        }
        uint64_t nap = nap_ms < deadline - now ? nap_ms : deadline - now;
        struct timespec ts = {.tv_sec = (time_t)(nap / 1000),
                              .tv_nsec = (long)(nap % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        nap_ms = nap_ms < 20 ? nap_ms * 2 : 20;
    }
    if (seen < 0) {
        shm_log(RMACOLL_LOG_ERROR, "shm: segment %s was not created within %" PRIu64
                " ms (peer not started or failed?)", name, timeout_ms);
    } else {
        shm_log(RMACOLL_LOG_ERROR, "shm: segment %s has %lld bytes, %zu needed, "
                "after %" PRIu64 " ms", name, (long long)seen, bytes, timeout_ms);
    }
    return RMACOLL_ERR_TIMEOUT;
}

void rmacoll__shm_unlink(rmacoll__shm_t *seg)
{
    if (seg == NULL || !seg->owner) {
        return;
    }
    if (shm_unlink(seg->name) != 0 && errno != ENOENT) {
        shm_log(RMACOLL_LOG_WARN, "shm: cannot unlink segment %s: %s", seg->name,
                strerror(errno));
    }
    seg->owner = 0;
}

void rmacoll__shm_destroy(rmacoll__shm_t *seg)
{
    if (seg == NULL) {
        return;
    }
    rmacoll__shm_unlink(seg);
    if (seg->addr != NULL) {
        munmap(seg->addr, seg->bytes);
    }
    memset(seg, 0, sizeof(*seg));
}
