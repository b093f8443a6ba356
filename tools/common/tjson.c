/*
 * tjson.c - the tools' JSON helpers over cJSON (tjson.h).
 */
#include "tjson.h"

#include <inttypes.h>
#include <stdlib.h>

void tjson_i64(cJSON *obj, const char *key, int64_t v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%" PRId64, v);
    cJSON_AddRawToObject(obj, key, buf);
}

void tjson_u64(cJSON *obj, const char *key, uint64_t v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    cJSON_AddRawToObject(obj, key, buf);
}

void tjson_num(cJSON *obj, const char *key, const char *fmt, double v)
{
    char buf[64];

    snprintf(buf, sizeof(buf), fmt, v);
    cJSON_AddRawToObject(obj, key, buf);
}

void tjson_push_i64(cJSON *arr, int64_t v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%" PRId64, v);
    cJSON_AddItemToArray(arr, cJSON_CreateRaw(buf));
}

void tjson_push_num(cJSON *arr, const char *fmt, double v)
{
    char buf[64];

    snprintf(buf, sizeof(buf), fmt, v);
    cJSON_AddItemToArray(arr, cJSON_CreateRaw(buf));
}

void tjson_str(cJSON *obj, const char *key, const char *s)
{
    if (s == NULL) {
        cJSON_AddNullToObject(obj, key);
    } else {
        cJSON_AddStringToObject(obj, key, s);
    }
}

int tjson_print(FILE *f, cJSON *doc, int pretty, int nl)
{
    char *text = doc == NULL ? NULL : pretty ? cJSON_Print(doc) : cJSON_PrintUnformatted(doc);
    int rc = text == NULL ? -1 : 0;

    if (text != NULL) {
        fputs(text, f);
        if (nl) {
            fputc('\n', f);
        }
        cJSON_free(text);
    }
    cJSON_Delete(doc);
    return rc;
}
