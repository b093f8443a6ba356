/*
 * tjson.h - the tools' JSON output through cJSON (libcjson, Debian
 * libcjson-dev): documents are built as cJSON trees and printed by it.
 * cJSON keeps members in insertion order and prints compact documents
 * without spaces, as the tools always did. Numbers with a fixed format
 * (times as %.3f, bandwidths as %.6f) and 64-bit integers go in as raw
 * number text (cJSON holds numbers as doubles, exact only to 2^53), so a
 * figure reads as it did before cJSON. Strings are escaped by cJSON.
 * Allocation failures leave members out (cJSON's rule); nothing here
 * fails otherwise.
 */
#ifndef RMACOLL_TOOLS_TJSON_H
#define RMACOLL_TOOLS_TJSON_H

#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

/** obj[key] = v as a JSON integer (exact over all of int64 / uint64). */
void tjson_i64(cJSON *obj, const char *key, int64_t v);
void tjson_u64(cJSON *obj, const char *key, uint64_t v);
/** obj[key] = v printed with the printf format fmt (one double, e.g.
 *  "%.3f"). */
void tjson_num(cJSON *obj, const char *key, const char *fmt, double v);
/** Appends to array arr: v (integer) or fmt(v). */
void tjson_push_i64(cJSON *arr, int64_t v);
void tjson_push_num(cJSON *arr, const char *fmt, double v);
/** obj[key] = s (NULL: JSON null). */
void tjson_str(cJSON *obj, const char *key, const char *s);
/** Prints doc to f, formatted (pretty: 1, cJSON's tabs and newlines) or
 *  compact (0), then a newline when nl; frees doc. Returns 0, or -1 when
 *  the document could not be printed (out of memory). */
int tjson_print(FILE *f, cJSON *doc, int pretty, int nl);

#endif /* RMACOLL_TOOLS_TJSON_H */
