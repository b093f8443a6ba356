/*
 * text.h - small text helpers shared by every layer: the printf into a
 * caller's error buffer, blank trimming, and the one parser of boolean and
 * integer values (configuration values and environment variables alike).
 * Thread-safe (no state).
 */
#ifndef RMACOLL_CORE_TEXT_H
#define RMACOLL_CORE_TEXT_H

#include <stdarg.h>
#include <stddef.h>

/** printf into errbuf[errlen]; nothing when errbuf is NULL or errlen 0. */
void rmacoll__errbuf_printf(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** The same with a va_list. */
void rmacoll__errbuf_vprintf(char *errbuf, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/** Copies text without leading and trailing blanks (space, tab, CR, LF)
 *  into out[len] (len > 0); 0, or -1 when it does not fit. */
int rmacoll__trim(const char *text, char *out, size_t len);

/** A boolean, blanks around it and any case: true|1|yes|on is 1,
 *  false|0|no|off is 0, anything else (or NULL) -1. */
int rmacoll__parse_bool(const char *text);

/** The environment variable name as a boolean (rmacoll__parse_bool);
 *  dflt when it is unset or not a boolean. */
int rmacoll__env_bool(const char *name, int dflt);

/**
 * The environment variable name as a decimal integer in [lo, hi]: 1 and
 * *out set; 0 when it is unset or empty; 0 and *bad = 1 when it is not a
 * whole decimal number in range (*out unchanged).
 */
int rmacoll__env_int(const char *name, long lo, long hi, int *out, int *bad);

#endif /* RMACOLL_CORE_TEXT_H */
