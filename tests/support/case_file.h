/*
 * case_file.h - loads a count-matrix case of tests/cases by file name, for
 * the tests (include after <cmocka.h>: a file that does not load fails
 * the test with the loader's message). RMACOLL_CASES_DIR is the tests'
 * case folder (tests/CMakeLists.txt).
 */
#ifndef RMACOLL_TESTS_CASE_FILE_H
#define RMACOLL_TESTS_CASE_FILE_H

#include <stdio.h>

#include "cases.h"

static inline rmacoll_case_t *load(const char *file)
{
    char path[512], err[256];
    rmacoll_case_t *c = NULL;

    snprintf(path, sizeof(path), "%s/%s", RMACOLL_CASES_DIR, file);
    if (rmacoll_case_load(path, &c, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fail_msg("%s", err);
    }
    return c;
}

#endif
