/*
 * delay.h - randomised delays for tests of the executor's ordering
 * (docs/protocol.md, Dataflow execution): with RMACOLL_TEST_DELAY_US=N in
 * the environment (read once per process), every hand-over of puts to a
 * transport (the proxy's post_puts, a CE step's copies) first sleeps a
 * random 0..N microseconds, so ranks and lanes interleave differently on
 * every run. Off (unset or 0): one predictable branch. Thread-safe.
 */
#ifndef RMACOLL_CORE_BASE_DELAY_H
#define RMACOLL_CORE_BASE_DELAY_H

/* Sleeps a random 0..RMACOLL_TEST_DELAY_US microseconds; nothing when off. */
void rmacoll__test_delay(void);

#endif /* RMACOLL_CORE_BASE_DELAY_H */
