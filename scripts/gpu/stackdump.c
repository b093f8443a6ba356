/*
 * stackdump.c - thread stacks of a running process on a machine without
 * gdb (the GPU machine). LD_PRELOAD it: a SIGUSR2 sent to a thread
 * (tgkill, or `kill -USR2` to each /proc/PID/task/TID) writes that
 * thread's return addresses, with the symbol each falls in (dladdr: the
 * exported ones; else the object and the offset in it, for addr2line), to stderr, one line per frame, then the program goes on.
 *   cc -O1 -g -shared -fPIC -o stackdump.so scripts/gpu/stackdump.c -ldl
 *   LD_PRELOAD=$PWD/stackdump.so prog ...
 *   then, for every TID listed in /proc/PID/task: kill -USR2 TID
 * (backtrace() from a signal handler: fine for a diagnosis, not for
 * production.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void dump(int sig)
{
    void *pc[48];
    char line[512];
    int n = backtrace(pc, 48);
    long tid = syscall(SYS_gettid);

    (void)sig;
    for (int i = 0; i < n; i++) {
        Dl_info d;
        int k;

        if (dladdr(pc[i], &d) && d.dli_sname != NULL) {
            k = snprintf(line, sizeof(line), "stack %d/%ld #%d %s+0x%lx (%s)\n", getpid(), tid,
                         i, d.dli_sname, (unsigned long)((char *)pc[i] - (char *)d.dli_saddr),
                         d.dli_fname ? d.dli_fname : "?");
        } else if (dladdr(pc[i], &d) && d.dli_fname != NULL) {
            /* a static function: its offset in the object, for addr2line */
            k = snprintf(line, sizeof(line), "stack %d/%ld #%d ? %s+0x%lx\n", getpid(), tid, i,
                         d.dli_fname, (unsigned long)((char *)pc[i] - (char *)d.dli_fbase));
        } else {
            k = snprintf(line, sizeof(line), "stack %d/%ld #%d %p\n", getpid(), tid, i, pc[i]);
        }
        if (k > 0) {
            ssize_t w = write(2, line, (size_t)k < sizeof(line) ? (size_t)k : sizeof(line) - 1);
            (void)w;
        }
    }
}

__attribute__((constructor)) static void install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dump;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, NULL);
}
