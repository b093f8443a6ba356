/*
 * fault.h - fault injection for tests (issue 33): with
 * RMACOLL_TEST_FAULT=SITE:N in the environment (read once per process),
 * the N-th hand-over of puts at SITE in this process (1-based; counted
 * over all communicators) fails as a transport error of this rank:
 *   net   the proxy's post_puts to the network transport
 *   copy  a host copy step's post_puts to the node transport (ce)
 *   stall after the N-th hand-over of puts to the network transport, the
 *         proxy thread's next heartbeat post does not return (the thread
 *         stays inside the transport call, holding its lock, until the
 *         communicator is destroyed): a provider call that spins or
 *         blocks, as the rank's own watch sees it (core/exec/wait.c)
 * Off (unset): one predictable branch per hand-over. Thread-safe.
 */
#ifndef RMACOLL_CORE_BASE_FAULT_H
#define RMACOLL_CORE_BASE_FAULT_H

typedef enum rmacoll__fault_site {
    RMACOLL__FAULT_NET = 0,
    RMACOLL__FAULT_COPY = 1,
    RMACOLL__FAULT_STALL = 2
} rmacoll__fault_site_t;

/** Non-zero when this hand-over at site must fail (the injected fault). */
int rmacoll__test_fault(rmacoll__fault_site_t site);

#endif /* RMACOLL_CORE_BASE_FAULT_H */
