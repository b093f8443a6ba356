/*
 * nvtx_record.c - a minimal NVTX tool for test_trace: loaded by the NVTX
 * loader inside librmacoll through NVTX_INJECTION64_PATH, it takes the core
 * module's RangePushEx and RangePop and records each event (message,
 * payload) in memory; the test reads them with nvtx_record_events().
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#define NVTX_RECORD_MAX 64

static struct {
    char what[48]; /* "push MESSAGE" or "pop" */
    uint64_t payload;
} events[NVTX_RECORD_MAX];
static int nevents;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int record_push(const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&lock);
    if (nevents < NVTX_RECORD_MAX) {
        snprintf(events[nevents].what, sizeof(events[0].what), "push %s",
                 a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?");
        events[nevents].payload =
            a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 ? a->payload.ullValue : ~0ull;
        nevents++;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

static int record_pop(void)
{
    pthread_mutex_lock(&lock);
    if (nevents < NVTX_RECORD_MAX) {
        snprintf(events[nevents].what, sizeof(events[0].what), "pop");
        events[nevents].payload = 0;
        nevents++;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

/* The events so far, one per line: "push rmacoll:alltoallv 20" or "pop". */
int nvtx_record_events(char *out, size_t len)
{
    size_t off = 0;

    pthread_mutex_lock(&lock);
    out[0] = '\0';
    for (int i = 0; i < nevents && off < len; i++) {
        off += (size_t)snprintf(out + off, len - off, strcmp(events[i].what, "pop") == 0
                                                          ? "%s\n" : "%s %llu\n",
                                events[i].what, (unsigned long long)events[i].payload);
    }
    pthread_mutex_unlock(&lock);
    return nevents;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;

    if (cb == NULL || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
        size <= NVTX_CBID_CORE_RangePop) {
        return 0;
    }
    *table[NVTX_CBID_CORE_RangePushEx] = (NvtxFunctionPointer)record_push;
    *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)record_pop;
    return 1;
}
