/*
 * test_log.c - NCCL_DEBUG-style logging (core/base/log.c) and the table of
 * environment variables (core/config/env.c): case-insensitive levels and
 * subsystems, the line prefix, RMACOLL_LOG_FILE with %h/%p, the subsystem
 * filter of the default (bootstrap) logger, and the warning about unknown
 * RMACOLL_* variables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config/env.h"
#include "core/base/log.h"
#include "core/base/text.h"

static char log_path[256];

static void test_levels(void **state)
{
    (void)state;
    assert_int_equal(rmacoll__log_level_from_name("INFO"), RMACOLL_LOG_INFO);
    assert_int_equal(rmacoll__log_level_from_name("info"), RMACOLL_LOG_INFO);
    assert_int_equal(rmacoll__log_level_from_name("Warn"), RMACOLL_LOG_WARN);
    assert_int_equal(rmacoll__log_level_from_name("WARNING"), RMACOLL_LOG_WARN);
    assert_int_equal(rmacoll__log_level_from_name("TRACE"), RMACOLL_LOG_TRACE);
    assert_int_equal(rmacoll__log_level_from_name("verbose"), -1);
    assert_int_equal(rmacoll__log_level_from_name(NULL), -1);
}

static void test_subsystems(void **state)
{
    uint32_t m = 0;

    (void)state;
    assert_int_equal(rmacoll__log_subsys_parse("BOOTSTRAP,core", &m, NULL, 0), 0);
    assert_int_equal(m, RMACOLL_LOG_SUBSYS_BOOTSTRAP | RMACOLL_LOG_SUBSYS_CORE);
    assert_int_equal(rmacoll__log_subsys_parse("[plan, sched]", &m, NULL, 0), 0);
    assert_int_equal(m, RMACOLL_LOG_SUBSYS_PLAN | RMACOLL_LOG_SUBSYS_SCHED);
    assert_int_equal(rmacoll__log_subsys_parse("^transport", &m, NULL, 0), 0);
    assert_int_equal(m, ~RMACOLL_LOG_SUBSYS_TRANSPORT);
    assert_int_equal(rmacoll__log_subsys_parse("All", &m, NULL, 0), 0);
    assert_int_equal(m, RMACOLL_LOG_SUBSYS_ALL);
    m = 7;
    assert_int_equal(rmacoll__log_subsys_parse("core,nosuch", &m, NULL, 0), -1);
    assert_int_equal(m, 7);
    assert_int_equal(rmacoll__log_subsys_parse("", &m, NULL, 0), -1);
    {   /* the entry at fault, as the log.subsystems key reports it */
        char bad[16];
        memset(bad, '#', sizeof(bad));
        assert_int_equal(rmacoll__log_subsys_parse(" core, nosuch ", &m, bad, sizeof(bad)), -1);
        assert_string_equal(bad, "nosuch");
        assert_int_equal(rmacoll__log_subsys_parse("[core", &m, bad, sizeof(bad)), -1);
        assert_string_equal(bad, "[core");
        assert_int_equal(rmacoll__log_subsys_parse(" ^ ", &m, bad, sizeof(bad)), -1);
        assert_string_equal(bad, "^");
        assert_int_equal(m, 7);
    }
    assert_string_equal(rmacoll__log_subsys_name(RMACOLL_LOG_SUBSYS_BOOTSTRAP), "bootstrap");
}

/* The one boolean / integer parser of core/base/text.c (configuration
 * values, RMACOLL_CUDA_GRAPH, RMACOLL_DEVICE_SIGNALS, launcher variables). */
static void test_text_parsers(void **state)
{
    int v = -5, bad = 0;
    char buf[8];

    (void)state;
    assert_int_equal(rmacoll__parse_bool("true"), 1);
    assert_int_equal(rmacoll__parse_bool(" ON\n"), 1);
    assert_int_equal(rmacoll__parse_bool("Yes"), 1);
    assert_int_equal(rmacoll__parse_bool("1"), 1);
    assert_int_equal(rmacoll__parse_bool("off"), 0);
    assert_int_equal(rmacoll__parse_bool("FALSE"), 0);
    assert_int_equal(rmacoll__parse_bool("0"), 0);
    assert_int_equal(rmacoll__parse_bool("no "), 0);
    assert_int_equal(rmacoll__parse_bool("2"), -1);
    assert_int_equal(rmacoll__parse_bool(""), -1);
    assert_int_equal(rmacoll__parse_bool(NULL), -1);
    unsetenv("RMACOLL_TEST_TEXT");
    assert_int_equal(rmacoll__env_bool("RMACOLL_TEST_TEXT", 1), 1);
    setenv("RMACOLL_TEST_TEXT", "maybe", 1);
    assert_int_equal(rmacoll__env_bool("RMACOLL_TEST_TEXT", 0), 0);
    setenv("RMACOLL_TEST_TEXT", "Off", 1);
    assert_int_equal(rmacoll__env_bool("RMACOLL_TEST_TEXT", 1), 0);
    setenv("RMACOLL_TEST_TEXT", "42", 1);
    assert_int_equal(rmacoll__env_int("RMACOLL_TEST_TEXT", 0, 100, &v, &bad), 1);
    assert_int_equal(v, 42);
    assert_int_equal(bad, 0);
    assert_int_equal(rmacoll__env_int("RMACOLL_TEST_TEXT", 0, 41, &v, &bad), 0);
    assert_int_equal(v, 42);
    assert_int_equal(bad, 1);
    bad = 0;
    setenv("RMACOLL_TEST_TEXT", "4x", 1);
    assert_int_equal(rmacoll__env_int("RMACOLL_TEST_TEXT", 0, 100, &v, &bad), 0);
    assert_int_equal(bad, 1);
    bad = 0;
    setenv("RMACOLL_TEST_TEXT", "", 1);
    assert_int_equal(rmacoll__env_int("RMACOLL_TEST_TEXT", 0, 100, &v, &bad), 0);
    assert_int_equal(bad, 0);
    unsetenv("RMACOLL_TEST_TEXT");
    memset(buf, '#', sizeof(buf));
    assert_int_equal(rmacoll__trim("  ab c\t", buf, sizeof(buf)), 0);
    assert_memory_equal(buf, "ab c\0###", 8);
    assert_int_equal(rmacoll__trim("12345678", buf, sizeof(buf)), -1);
    memset(buf, '#', sizeof(buf));
    rmacoll__errbuf_printf(buf, 4, "%d", 123456);
    assert_memory_equal(buf, "123\0####", 8);
    rmacoll__errbuf_printf(NULL, 0, "%d", 1);
}

static void test_expand_path(void **state)
{
    char out[128], host[64] = "", want[256];

    (void)state;
    gethostname(host, sizeof(host) - 1);
    assert_int_equal(rmacoll__log_expand_path("/tmp/x.%h.%p.%%.log", out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "/tmp/x.%s.%d.%%.log", host, (int)getpid());
    assert_string_equal(out, want);
    assert_int_equal(rmacoll__log_expand_path("%h%h%h%h%h%h%h%h%h%h", out, 8), -1);
}

/* The default logger takes level and subsystems from the environment; the
 * lines go to RMACOLL_LOG_FILE with the host:pid:tid [rank] prefix, and a
 * filtered subsystem writes nothing. */
static void test_default_logger_file(void **state)
{
    rmacoll__logger_t lg;
    char line[1024], host[64] = "", pat[512];
    FILE *f;
    int lines = 0, matched = 0;
    regex_t re;

    (void)state;
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = '\0';
    setenv("RMACOLL_LOG_LEVEL", "INFO", 1);
    setenv("RMACOLL_LOG_SUBSYSTEMS", "bootstrap", 1);
    rmacoll__logger_default(&lg);
    assert_int_equal(lg.level, RMACOLL_LOG_INFO);
    assert_int_equal(lg.subsys, RMACOLL_LOG_SUBSYS_BOOTSTRAP);
    lg.rank = 3;
    rmacoll__log(&lg, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_BOOTSTRAP, "hello %d", 42);
    rmacoll__log(&lg, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_TRANSPORT, "filtered out");
    rmacoll__log(&lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP, "too verbose");
    lg.rank = -1;
    /* a message repeating the subsystem's name does not print it twice */
    rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP, "bootstrap: no rank");
    unsetenv("RMACOLL_LOG_LEVEL");
    unsetenv("RMACOLL_LOG_SUBSYSTEMS");

    f = fopen(log_path, "r");
    assert_non_null(f);
    snprintf(pat, sizeof(pat),
             "^%s:%d:[0-9]+ \\[(3|-)\\] rmacoll (INFO bootstrap: hello 42|ERROR "
             "bootstrap: no rank)$", host, (int)getpid());
    assert_int_equal(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB), 0);
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        lines++;
        if (regexec(&re, line, 0, NULL, 0) == 0) {
            matched++;
        } else {
            print_error("unexpected line: %s (pattern %s)\n", line, pat);
        }
    }
    regfree(&re);
    fclose(f);
    assert_int_equal(lines, 2);
    assert_int_equal(matched, 2);
}

static void test_env_known_and_unknown(void **state)
{
    rmacoll__logger_t lg;
    size_t n = 0;
    const rmacoll__env_var_t *v = rmacoll__env_vars(&n);

    (void)state;
    assert_true(n > 10);
    assert_non_null(v);
    assert_true(rmacoll__env_known("RMACOLL_RELAY_SLOTS"));     /* config key */
    assert_true(rmacoll__env_known("RMACOLL_OFI_PROVIDER"));    /* config key */
    assert_true(rmacoll__env_known("RMACOLL_LOG_FILE"));        /* outside */
    assert_true(rmacoll__env_known("RMACOLL_TEST_ANYTHING"));   /* prefix */
    assert_false(rmacoll__env_known("RMACOLL_RELAY_SLOT"));
    assert_false(rmacoll__env_known("RMACOLL_"));

    setenv("RMACOLL_RELAY_SLOT", "8", 1);
    setenv("RMACOLL_NO_SUCH_THING", "1", 1);
    rmacoll__logger_default(&lg);
    lg.level = RMACOLL_LOG_ERROR;   /* the warnings are counted, not shown */
    assert_int_equal(rmacoll__env_warn_unknown(&lg), 2);
    /* once per process */
    assert_int_equal(rmacoll__env_warn_unknown(&lg), 2);
    unsetenv("RMACOLL_RELAY_SLOT");
    unsetenv("RMACOLL_NO_SUCH_THING");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_subsystems),
        cmocka_unit_test(test_text_parsers),
        cmocka_unit_test(test_expand_path),
        cmocka_unit_test(test_default_logger_file),
        cmocka_unit_test(test_env_known_and_unknown),
    };
    int rc;

    /* before the first line: the sink is chosen once per process */
    snprintf(log_path, sizeof(log_path), "/tmp/rmacoll-test-log.%d.txt", (int)getpid());
    unlink(log_path);
    setenv("RMACOLL_LOG_FILE", "/tmp/rmacoll-test-log.%p.txt", 1);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(log_path);
    return rc;
}
