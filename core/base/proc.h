/*
 * proc.h - a watch on another process of this host: whether a node peer's
 * process has exited, so that its death is named at once even where no
 * bootstrap root can report it (the root ran in that process, or an
 * embedder's out-of-band allgather replaced the root).
 *
 * A watch is a pidfd (pidfd_open(2), Linux 5.3): it refers to one process,
 * never to a later one that reuses its pid, and poll(2) finds it readable
 * once that process has exited (a zombie or reaped). A watch is opened only
 * when the peer runs in this PID namespace (the namespace's id, which the
 * peer published, equals this process's) and the process at that pid
 * started at the time the peer published (field 22 of /proc/PID/stat,
 * clock ticks after boot): a peer in another PID namespace (a container
 * per rank), or a kernel without pidfd_open, gives no watch, and the
 * caller relies on its other signs (the root's report, the heartbeat).
 * Thread-safety: the functions keep no state; a watch is an fd, closed by
 * its owner.
 */
#ifndef RMACOLL_CORE_PROC_H
#define RMACOLL_CORE_PROC_H

#include <stdint.h>

/** The start time of process pid in clock ticks after boot (field 22 of
 *  /proc/PID/stat), or 0 when it cannot be read. pid 0: this process. */
uint64_t rmacoll__proc_start_ticks(long pid);

/** The id of this process's PID namespace (device and inode of
 *  /proc/self/ns/pid, folded into one word), or 0 when it cannot be read. */
uint64_t rmacoll__proc_pidns(void);

/** A watch on process pid (a pidfd), opened only when that process runs in
 *  PID namespace `pidns` (rmacoll__proc_pidns, as it published it), which
 *  is this process's, and started at `start` ticks
 *  (rmacoll__proc_start_ticks); -1 when not, when it has gone already, or
 *  when pidfds are unavailable. */
int rmacoll__proc_watch_open(long pid, uint64_t start, uint64_t pidns);

/** The index in fds[0..n) of the first watch that poll(2) finds readable
 *  (its process exited), or -1 (none; negative fds are skipped; an fd
 *  that is not open, POLLNVAL, counts as none). One poll(2) per 64
 *  watches, never blocks. Confirm with rmacoll__proc_exited before
 *  blaming: an fd the application closed behind the library may have
 *  been reused. */
int rmacoll__proc_watch_exited(const int *fds, int n);

/** 1 when process pid that started at `start` ticks has exited: no
 *  /proc/PID/stat, another start time there (pid reused), or state Z or
 *  X; 0 while it runs. */
int rmacoll__proc_exited(long pid, uint64_t start);

#endif /* RMACOLL_CORE_PROC_H */
