/* status.c - status strings and datatype table (generated from one table each). */
#include <string.h>

#include "rmacoll.h"

const char *rmacoll_status_string(rmacoll_status_t status)
{
    switch (status) {
#define RMACOLL_STATUS_STR_(name, value, str) \
    case name:                                \
        return str;
        RMACOLL_STATUS_TABLE(RMACOLL_STATUS_STR_)
#undef RMACOLL_STATUS_STR_
    default:
        return "unknown status";
    }
}

const char *rmacoll_status_name(rmacoll_status_t status)
{
    switch (status) {
#define RMACOLL_STATUS_NAME_(name, value, str) \
    case name:                                 \
        return #name;
        RMACOLL_STATUS_TABLE(RMACOLL_STATUS_NAME_)
#undef RMACOLL_STATUS_NAME_
    default:
        return "RMACOLL_STATUS_UNKNOWN";
    }
}

static const struct {
    const char *name;
    size_t size;
} dtypes[RMACOLL_DATATYPE_COUNT] = {
    [RMACOLL_INT8] = {"int8", 1},         [RMACOLL_UINT8] = {"uint8", 1},
    [RMACOLL_INT32] = {"int32", 4},       [RMACOLL_UINT32] = {"uint32", 4},
    [RMACOLL_INT64] = {"int64", 8},       [RMACOLL_UINT64] = {"uint64", 8},
    [RMACOLL_FLOAT16] = {"float16", 2},   [RMACOLL_BFLOAT16] = {"bfloat16", 2},
    [RMACOLL_FLOAT32] = {"float32", 4},   [RMACOLL_FLOAT64] = {"float64", 8},
    [RMACOLL_BOOL] = {"bool", 1},         [RMACOLL_INT16] = {"int16", 2},
    [RMACOLL_UINT16] = {"uint16", 2},     [RMACOLL_COMPLEX64] = {"complex64", 8},
    [RMACOLL_COMPLEX128] = {"complex128", 16},
    [RMACOLL_FLOAT8_E4M3] = {"float8_e4m3", 1},
    [RMACOLL_FLOAT8_E5M2] = {"float8_e5m2", 1},
};

size_t rmacoll_datatype_size(rmacoll_datatype_t dtype)
{
    return ((unsigned)dtype < RMACOLL_DATATYPE_COUNT) ? dtypes[dtype].size : 0;
}

const char *rmacoll_datatype_name(rmacoll_datatype_t dtype)
{
    return ((unsigned)dtype < RMACOLL_DATATYPE_COUNT) ? dtypes[dtype].name : NULL;
}

rmacoll_status_t rmacoll_datatype_from_name(const char *name,
                                            rmacoll_datatype_t *dtype)
{
    /* torch and ml_dtypes spell the finite-only E4M3 "float8_e4m3fn" */
    if (name != NULL && strcmp(name, "float8_e4m3fn") == 0) {
        name = "float8_e4m3";
    }
    for (int i = 0; name != NULL && i < RMACOLL_DATATYPE_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *dtype = (rmacoll_datatype_t)i;
            return RMACOLL_SUCCESS;
        }
    }
    return RMACOLL_ERR_DATATYPE;
}
