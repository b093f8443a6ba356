/*
 * tproc.h - whether a process of this host (and PID namespace) has gone,
 * for the transports' sweeps of files a dead peer left (ofi's shm
 * regions). Inline, like tclock.h. Thread-safe.
 *
 * A process counts as gone once it can run no more user code:
 *  - no such process (kill(pid, 0) gives ESRCH);
 *  - a zombie (exited; its parent, e.g. a launcher still waiting on the
 *    other ranks, has not reaped it);
 *  - exiting: PF_EXITING (0x4) in the flags field of /proc/PID/stat.
 *    A killed process closes its sockets (so its peers learn of the
 *    death) before it becomes a zombie; on a busy host it can sit
 *    runnable in between for milliseconds, and a sweep then would keep
 *    its files (seen in fault campaigns: 2-6 % of kill runs, shm 4x1).
 * A zombie or exiting thread-group leader whose process still has other
 * threads (num_threads > 1: the main thread left by pthread_exit) is
 * alive. Fields: proc(5), "pid (comm) state ppid pgrp session tty_nr
 * tpgid flags ... num_threads" (flags the 9th field, num_threads the
 * 20th; comm may hold spaces and parentheses, so parsing starts after the
 * last ')').
 */
#ifndef RMACOLL_TRANSPORTS_COMMON_TPROC_H
#define RMACOLL_TRANSPORTS_COMMON_TPROC_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define RMACOLL__PF_EXITING 0x00000004ul

/* 1 when the text of /proc/PID/stat says the process has gone (above),
 * 0 when it may still run, or when the text is not understood. */
static inline int rmacoll__proc_stat_gone(const char *stat)
{
    const char *p = strrchr(stat, ')');
    unsigned long flags = 0, threads = 0;
    char state;

    if (p == NULL || p[1] != ' ' || p[2] == '\0') {
        return 0;
    }
    state = p[2];
    p += 3;
    /* fields 4..20 after the state: flags is the 6th of them, num_threads the 17th */
    for (int field = 4; field <= 20; field++) {
        char *end;
        long long v = strtoll(p, &end, 10); /* tty_nr and tpgid may be -1 */

        if (end == p) {
            return 0; /* cut short */
        }
        if (field == 9) {
            flags = (unsigned long)v;
        } else if (field == 20) {
            threads = (unsigned long)v;
        }
        p = end;
    }
    if (threads > 1) {
        return 0;
    }
    return state == 'Z' || state == 'X' || (flags & RMACOLL__PF_EXITING) != 0;
}

/* 1 when process pid has gone (above); 0 when it lives or cannot be told. */
static inline int rmacoll__proc_gone(long pid)
{
    char path[64], buf[512];
    FILE *f;
    size_t n;

    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return errno == ENOENT; /* reaped since kill() */
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return rmacoll__proc_stat_gone(buf);
}

#endif /* RMACOLL_TRANSPORTS_COMMON_TPROC_H */
