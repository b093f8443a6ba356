/*
 * text.c - the error-buffer printf, trimming and the boolean / integer
 * parser of text.h; every layer above uses these instead of its own.
 */
#include "core/base/text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void rmacoll__errbuf_printf(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    rmacoll__errbuf_vprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

void rmacoll__errbuf_vprintf(char *errbuf, size_t errlen, const char *fmt, va_list ap)
{
    if (errbuf == NULL || errlen == 0) {
        return;
    }
    vsnprintf(errbuf, errlen, fmt, ap);
}

static int text_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int rmacoll__trim(const char *text, char *out, size_t len)
{
    size_t n;

    while (text_is_space(*text)) {
        text++;
    }
    n = strlen(text);
    while (n > 0 && text_is_space(text[n - 1])) {
        n--;
    }
    if (n >= len) {
        return -1;
    }
    memcpy(out, text, n);
    out[n] = '\0';
    return 0;
}

int rmacoll__parse_bool(const char *text)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    char buf[16];

    if (text == NULL || rmacoll__trim(text, buf, sizeof(buf)) != 0) {
        return -1;
    }
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(buf, yes[i]) == 0) {
            return 1;
        }
        if (strcasecmp(buf, no[i]) == 0) {
            return 0;
        }
    }
    return -1;
}

int rmacoll__env_bool(const char *name, int dflt)
{
    int b = rmacoll__parse_bool(getenv(name));

    return b < 0 ? dflt : b;
}

int rmacoll__env_int(const char *name, long lo, long hi, int *out, int *bad)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || s[0] == '\0') {
        return 0;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        *bad = 1;
        return 0;
    }
    *out = (int)v;
    return 1;
}
