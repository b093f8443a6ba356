/*
 * fault.c - fault injection for tests (fault.h).
 */
#include "core/base/fault.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int fault_site = -1;      /* -1: off */
static unsigned long fault_at;   /* the hand-over that fails, 1-based */
static atomic_ulong fault_count[3];
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;

static void fault_read(void)
{
    const char *v = getenv("RMACOLL_TEST_FAULT");
    const char *colon = v != NULL ? strchr(v, ':') : NULL;

    if (colon == NULL) {
        return;
    }
    if ((size_t)(colon - v) == 3 && strncmp(v, "net", 3) == 0) {
        fault_site = RMACOLL__FAULT_NET;
    } else if ((size_t)(colon - v) == 4 && strncmp(v, "copy", 4) == 0) {
        fault_site = RMACOLL__FAULT_COPY;
    } else if ((size_t)(colon - v) == 5 && strncmp(v, "stall", 5) == 0) {
        fault_site = RMACOLL__FAULT_STALL;
    }
    fault_at = strtoul(colon + 1, NULL, 10);
    if (fault_at == 0) {
        fault_site = -1;
    }
}

int rmacoll__test_fault(rmacoll__fault_site_t site)
{
    pthread_once(&fault_once, fault_read);
    if (__builtin_expect(fault_site != (int)site, 1)) {
        return 0;
    }
    return atomic_fetch_add(&fault_count[site], 1) + 1 == fault_at;
}
