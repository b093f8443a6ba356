/*
 * trace.c - NVTX ranges (trace.h).
 */
#include "core/base/trace.h"

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
