/*
 * trace.c - NVTX ranges (trace.h).
 */
#include "core/base/trace.h"

#include <pthread.h>
#include <stdlib.h>

static int trace_tool;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;

static void trace_read(void)
{
#ifdef RMACOLL_HAVE_NVTX
    const char *v = getenv("NVTX_INJECTION64_PATH");

    trace_tool = v != NULL && v[0] != '\0';
#endif
}

int rmacoll__trace_on(void)
{
    pthread_once(&trace_once, trace_read);
    return trace_tool;
}

#ifdef RMACOLL_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

void rmacoll__trace_push(const char *name, uint64_t bytes)
{
    nvtxEventAttributes_t a;

    a = (nvtxEventAttributes_t){0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = bytes;
    (void)nvtxRangePushEx(&a);
}

void rmacoll__trace_pop(void)
{
    (void)nvtxRangePop();
}
#else
void rmacoll__trace_push(const char *name, uint64_t bytes)
{
    (void)name;
    (void)bytes;
}

void rmacoll__trace_pop(void)
{
}
#endif
