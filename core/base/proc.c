/*
 * proc.c - watches on other processes of this host (proc.h).
 */
#include "core/base/proc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The fields of /proc/PID/stat after "pid (comm) " into buf (comm may hold
 * spaces and ')', so they start after the last ')'): the state first
 * (field 3). NULL when the process has no such file (gone) or the text is
 * not understood. pid 0: this process. */
static const char *stat_fields(long pid, char *buf, size_t len)
{
    char path[64];
    const char *p;
    FILE *f;
    size_t n;

    if (pid == 0) {
        snprintf(path, sizeof(path), "/proc/self/stat");
    } else {
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    }
    f = fopen(path, "r");
    if (f == NULL) {
        return NULL;
    }
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] != '\0' ? p + 2 : NULL;
}

/* starttime (field 22) from the fields stat_fields gives, or 0. */
static uint64_t start_of(const char *fields)
{
    const char *p = fields;

    for (int field = 3; p != NULL && field < 22; field++) {
        p = strchr(p, ' ');
        p = p != NULL ? p + 1 : NULL;
    }
    return p != NULL ? strtoull(p, NULL, 10) : 0;
}

uint64_t rmacoll__proc_start_ticks(long pid)
{
    char buf[1024];
    const char *f = stat_fields(pid, buf, sizeof(buf));

    return f != NULL ? start_of(f) : 0;
}

uint64_t rmacoll__proc_pidns(void)
{
    struct stat sb;

    if (stat("/proc/self/ns/pid", &sb) != 0) {
        return 0;
    }
    return (uint64_t)sb.st_ino ^ ((uint64_t)sb.st_dev << 40);
}

int rmacoll__proc_watch_open(long pid, uint64_t start, uint64_t pidns)
{
#ifdef SYS_pidfd_open
    int fd;

    if (pid <= 0 || start == 0 || pidns == 0 || pidns != rmacoll__proc_pidns()) {
        return -1;
    }
    fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (fd < 0) {
        return -1;
    }
    /* read after the open: the fd now holds the process that had this pid
     * then, which is the peer only if it started when the peer did */
    if (rmacoll__proc_start_ticks(pid) != start) {
        close(fd);
        return -1;
    }
    return fd;
#else
    (void)pid;
    (void)start;
    (void)pidns;
    return -1;
#endif
}

int rmacoll__proc_watch_exited(const int *fds, int n)
{
    enum { CHUNK = 64 };
    struct pollfd pf[CHUNK];
    int idx[CHUNK];

    for (int base = 0; base < n; base += CHUNK) {
        int m = 0;

        for (int i = base; i < n && i < base + CHUNK; i++) {
            if (fds[i] >= 0) {
                pf[m].fd = fds[i];
                pf[m].events = POLLIN;
                pf[m].revents = 0;
                idx[m++] = i;
            }
        }
        if (m == 0 || poll(pf, (nfds_t)m, 0) <= 0) {
            continue;
        }
        for (int k = 0; k < m; k++) {
            if ((pf[k].revents & (POLLIN | POLLHUP)) != 0 &&
                (pf[k].revents & POLLNVAL) == 0) {
                return idx[k];
            }
        }
    }
    return -1;
}

int rmacoll__proc_exited(long pid, uint64_t start)
{
    char buf[1024];
    const char *f = stat_fields(pid, buf, sizeof(buf));

    return f == NULL || start_of(f) != start || f[0] == 'Z' || f[0] == 'X';
}
