/*
 * log.c - levelled, subsystem-masked logging to an injected function, or
 * in NCCL_DEBUG's style to stderr / RMACOLL_LOG_FILE:
 *
 *   host:pid:tid [rank] rmacoll LEVEL subsystem: message
 *
 * RMACOLL_LOG_FILE names the file (%h = host name, %p = pid, as
 * NCCL_DEBUG_FILE), opened once per process in append mode; stderr when
 * unset or when it cannot be opened. Levels and subsystem names are
 * case-insensitive. The default logger (the bootstrap's before a
 * communicator exists) takes RMACOLL_LOG_LEVEL and RMACOLL_LOG_SUBSYSTEMS
 * from the environment, so the filter applies to every line.
 */
#include "core/base/log.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/text.h"

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};
static const char *const level_tags[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

/* Bit i of RMACOLL_LOG_SUBSYS_* is rmacoll__log_subsys_names[i]. */
const char *const rmacoll__log_subsys_names[] = {"core",      "plan",  "sched",  "bootstrap",
                                                 "transport", "proxy", "config", NULL};
#define LOG_NSUBSYS ((int)(sizeof(rmacoll__log_subsys_names) / sizeof(char *)) - 1)

int rmacoll__log_level_from_name(const char *name)
{
    if (name == NULL) {
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            return i;
        }
    }
    if (strcasecmp(name, "warning") == 0) {
        return RMACOLL_LOG_WARN;
    }
    return -1;
}

const char *rmacoll__log_subsys_name(uint32_t subsys)
{
    for (int i = 0; i < LOG_NSUBSYS; i++) {
        if (subsys & (1u << i)) {
            return rmacoll__log_subsys_names[i];
        }
    }
    return "core";
}

int rmacoll__log_subsys_parse(const char *text, uint32_t *mask, char *bad, size_t badlen)
{
    char buf[512];
    char *s = buf;
    char *save = NULL;
    char *tok;
    uint32_t m = 0;
    int ntok = 0;
    int exclude = 0;   /* '^': every subsystem but the names */

    if (text == NULL || mask == NULL) {
        return -1;
    }
    if (rmacoll__trim(text, buf, sizeof(buf)) != 0) {
        rmacoll__errbuf_printf(bad, badlen, "%.*s", 32, text);
        return -1;
    }
    if (*s == '[') {
        size_t n = strlen(s);
        if (n < 2 || s[n - 1] != ']') {
            rmacoll__errbuf_printf(bad, badlen, "%s", buf);
            return -1;
        }
        s[n - 1] = '\0';
        s++;
    }
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    if (*s == '^') {
        exclude = 1;
        s++;
    }
    for (tok = strtok_r(s, ", \t\n", &save); tok != NULL; tok = strtok_r(NULL, ", \t\n", &save)) {
        int i;

        ntok++;
        for (i = 0; i < LOG_NSUBSYS; i++) {
            if (strcasecmp(tok, rmacoll__log_subsys_names[i]) == 0) {
                break;
            }
        }
        if (i < LOG_NSUBSYS) {
            m |= 1u << i;
        } else if (strcasecmp(tok, "all") == 0) {
            m = RMACOLL_LOG_SUBSYS_ALL;
        } else if (strcasecmp(tok, "none") == 0) {
            /* adds nothing */
        } else {
            rmacoll__errbuf_printf(bad, badlen, "%s", tok);
            return -1;
        }
    }
    if (ntok == 0) {
        rmacoll__errbuf_printf(bad, badlen, "%s", exclude ? "^" : "");
        return -1;
    }
    *mask = exclude ? RMACOLL_LOG_SUBSYS_ALL & ~m : m;
    return 0;
}

void rmacoll__logger_default(rmacoll__logger_t *lg)
{
    const char *env = getenv("RMACOLL_LOG_LEVEL");
    const char *sub = getenv("RMACOLL_LOG_SUBSYSTEMS");
    int lvl = env ? rmacoll__log_level_from_name(env) : -1;
    uint32_t mask = RMACOLL_LOG_SUBSYS_ALL;

    lg->fn = NULL;
    lg->ctx = NULL;
    lg->level = lvl >= 0 ? lvl : RMACOLL_LOG_WARN;
    if (sub == NULL || rmacoll__log_subsys_parse(sub, &mask, NULL, 0) != 0) {
        mask = RMACOLL_LOG_SUBSYS_ALL;   /* a bad list is reported by the config */
    }
    lg->subsys = mask;
    lg->rank = -1;
}

/* ---- the process's log sink ---- */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static FILE *log_file;          /* NULL = stderr */
static char log_host[64];

/* Expands %h (host name) and %p (pid) of RMACOLL_LOG_FILE; %% is %. */
int rmacoll__log_expand_path(const char *pattern, char *out, size_t len)
{
    size_t o = 0;
    char host[64] = "";

    if (pattern == NULL || out == NULL || len == 0) {
        return -1;
    }
    gethostname(host, sizeof(host) - 1);
    for (const char *p = pattern; *p != '\0'; p++) {
        char tmp[80];
        const char *add = tmp;

        if (*p == '%' && p[1] == 'h') {
            add = host;
            p++;
        } else if (*p == '%' && p[1] == 'p') {
            snprintf(tmp, sizeof(tmp), "%d", (int)getpid());
            p++;
        } else if (*p == '%' && p[1] == '%') {
            snprintf(tmp, sizeof(tmp), "%%");
            p++;
        } else {
            tmp[0] = *p;
            tmp[1] = '\0';
        }
        if (o + strlen(add) >= len) {
            return -1;
        }
        memcpy(out + o, add, strlen(add));
        o += strlen(add);
    }
    out[o] = '\0';
    return 0;
}

static void log_open(void)
{
    const char *pattern = getenv("RMACOLL_LOG_FILE");
    char path[4096];

    gethostname(log_host, sizeof(log_host) - 1);
    for (char *c = log_host; *c; c++) {
        if (*c == '.') {      /* short name, as NCCL */
            *c = '\0';
            break;
        }
    }
    if (pattern == NULL || *pattern == '\0') {
        return;
    }
    if (rmacoll__log_expand_path(pattern, path, sizeof(path)) == 0) {
        log_file = fopen(path, "a");
    }
    if (log_file == NULL) {
        fprintf(stderr, "%s:%d rmacoll WARN config: cannot open RMACOLL_LOG_FILE "
                "'%s'; logging to stderr\n", log_host, (int)getpid(), pattern);
    } else {
        setvbuf(log_file, NULL, _IOLBF, 0);
    }
}

void rmacoll__vlog(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                   uint32_t subsys, const char *fmt, va_list ap)
{
    char msg[1024], rank[16];
    const char *name, *text = msg;
    size_t nlen;
    FILE *f;

    if (lg == NULL || (int)level > lg->level || !(lg->subsys & subsys) ||
        (int)level < 0 || (int)level > RMACOLL_LOG_TRACE) {
        return;
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (lg->fn != NULL) {
        lg->fn(lg->ctx, level, subsys, msg);
        return;
    }
    pthread_once(&log_once, log_open);
    f = log_file != NULL ? log_file : stderr;
    if (lg->rank >= 0) {
        snprintf(rank, sizeof(rank), "%d", lg->rank);
    } else {
        snprintf(rank, sizeof(rank), "-");
    }
    /* "bootstrap: bootstrap: x" reads badly: the prefix names the
     * subsystem, so a message starting with the same word drops it. */
    name = rmacoll__log_subsys_name(subsys);
    nlen = strlen(name);
    if (strncmp(msg, name, nlen) == 0 && msg[nlen] == ':' && msg[nlen + 1] == ' ') {
        text = msg + nlen + 2;
    }
    /* one write per line: lines of threads and processes do not mix (a
     * fprintf to unbuffered stderr may write its pieces one by one: lines
     * of ranks on many cores were seen cut into each other) */
    {
        char line[1280];
        int n = snprintf(line, sizeof(line), "%s:%d:%ld [%s] rmacoll %s %s: %s\n", log_host,
                         (int)getpid(), (long)syscall(SYS_gettid), rank, level_tags[level],
                         name, text);

        if (n < 0) {
            return;
        }
        if ((size_t)n >= sizeof(line)) {
            n = (int)sizeof(line) - 1;
            line[n - 1] = '\n';
        }
        if (f == stderr) {
            int saved = errno; /* callers may still read theirs */
            ssize_t w;

            fflush(stderr);
            do {
                w = write(STDERR_FILENO, line, (size_t)n);
            } while (w < 0 && errno == EINTR);
            errno = saved;
        } else {
            fwrite(line, 1, (size_t)n, f);
            fflush(f);
        }
    }
}

void rmacoll__log(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                  uint32_t subsys, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rmacoll__vlog(lg, level, subsys, fmt, ap);
    va_end(ap);
}
