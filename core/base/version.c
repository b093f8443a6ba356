/*
 * version.c - rmacoll_get_version / rmacoll_version_string. The version
 * comes from the CMake project version (RMACOLL_VERSION_STRING and
 * RMACOLL_PROJECT_VERSION_* compile definitions); the header's
 * RMACOLL_VERSION_* must agree, checked at compile time.
 */
#include "rmacoll.h"

#ifndef RMACOLL_VERSION_STRING
#error "RMACOLL_VERSION_STRING comes from CMake (project version)"
#endif

_Static_assert(RMACOLL_VERSION_MAJOR == RMACOLL_PROJECT_VERSION_MAJOR &&
                   RMACOLL_VERSION_MINOR == RMACOLL_PROJECT_VERSION_MINOR &&
                   RMACOLL_VERSION_PATCH == RMACOLL_PROJECT_VERSION_PATCH,
               "include/rmacoll.h RMACOLL_VERSION_* differ from the CMake "
               "project version");

rmacoll_status_t rmacoll_get_version(int *version)
{
    if (version == NULL)
        return RMACOLL_ERR_INVALID_ARG;
    *version = RMACOLL_PROJECT_VERSION_MAJOR * 10000 +
               RMACOLL_PROJECT_VERSION_MINOR * 100 +
               RMACOLL_PROJECT_VERSION_PATCH;
    return RMACOLL_SUCCESS;
}

const char *rmacoll_version_string(void)
{
    return RMACOLL_VERSION_STRING;
}
