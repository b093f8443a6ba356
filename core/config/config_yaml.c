/*
 * config_yaml.c - reading a YAML configuration file with libcyaml: the
 * schema (every leaf a string in one flat struct, parsed afterwards by
 * config_value.c), libcyaml's error log captured and reworded with the
 * dotted key and its line, which a small scanner of the text finds
 * (libcyaml's own line numbers point at the enclosing mapping).
 */
#include "core/config/config_priv.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pthread.h>

#include <cyaml/cyaml.h>
#include <yaml.h>

#include "core/base/log.h"
#include "core/base/text.h"

/* ---- where each key is: libyaml's event marks ----
 * libcyaml's own line numbers point at the enclosing mapping, so the text
 * is parsed once more with libyaml (which libcyaml sits on) and the mark
 * of every mapping key and of every scalar of a sequence is recorded under
 * its dotted path ("relay.slots"). */

typedef struct config_mark {
    char path[128];   /* dotted path of the key (of the sequence, for an item) */
    const char *item; /* NULL: a key; else the item's text (owned) */
    int line;         /* 1-based */
    int vline, vcol;  /* a key's value: where it starts (1-based), */
    char vkind;       /* and what it is: 's' scalar, 'm' map, 'l' list, 0 unknown */
} config_mark_t;

typedef struct config_marks {
    config_mark_t *m;
    size_t n, cap;
    int doc2_line;    /* line of a second document's start, 0 if none */
} config_marks_t;

#define CONFIG_YAML_DEPTH 16

static void config_marks_free(config_marks_t *mk)
{
    for (size_t i = 0; i < mk->n; i++) {
        free((char *)mk->m[i].item);
    }
    free(mk->m);
    memset(mk, 0, sizeof(*mk));
}

static void config_marks_add(config_marks_t *mk, const char *path, const char *item, int line)
{
    if (mk->n == mk->cap) {
        size_t cap = mk->cap ? mk->cap * 2 : 64;
        config_mark_t *m = realloc(mk->m, cap * sizeof(*m));
        if (m == NULL) {
            return; /* a position lost: the message falls back to libcyaml's line */
        }
        mk->m = m;
        mk->cap = cap;
    }
    snprintf(mk->m[mk->n].path, sizeof(mk->m[mk->n].path), "%s", path);
    mk->m[mk->n].item = item != NULL ? strdup(item) : NULL;
    mk->m[mk->n].line = line;
    mk->m[mk->n].vline = 0;
    mk->m[mk->n].vcol = 0;
    mk->m[mk->n].vkind = 0;
    mk->n++;
}

/* A value starts (kind 's', 'm', 'l') at depth (a mapping waiting for a
 * value): note it on that mapping's last key. */
static void config_marks_value(config_marks_t *mk, const long *keymark, int depth,
                               const int *state, char kind, const yaml_mark_t *at)
{
    if (depth > 0 && state[depth - 1] == 0 && keymark[depth - 1] >= 0 &&
        (size_t)keymark[depth - 1] < mk->n) {
        config_mark_t *m = &mk->m[keymark[depth - 1]];
        m->vline = (int)at->line + 1;
        m->vcol = (int)at->column + 1;
        m->vkind = kind;
    }
}

/* Parses t once and records the marks; stops quietly at a syntax error
 * (the keys before it keep their lines). */
static void config_marks_build(const char *t, size_t len, config_marks_t *mk)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    /* one entry per open collection: a mapping waiting for a key (1) or a
     * value (0), or a sequence (-1); plen: length of path at its start */
    int state[CONFIG_YAML_DEPTH];
    size_t plen[CONFIG_YAML_DEPTH];
    long keymark[CONFIG_YAML_DEPTH]; /* index of the mapping's last key mark */
    char path[128] = "";
    int depth = 0, done = 0, docs = 0;

    memset(mk, 0, sizeof(*mk));
    if (!yaml_parser_initialize(&parser)) {
        return;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)t, len);
    while (!done && yaml_parser_parse(&parser, &ev)) {
        int line = (int)ev.start_mark.line + 1;
        int key = depth > 0 && state[depth - 1] == 1;
        int item = depth > 0 && state[depth - 1] == -1;

        switch (ev.type) {
        case YAML_SCALAR_EVENT:
            if (key) {
                size_t base = plen[depth - 1];
                snprintf(path + base, sizeof(path) - base, "%s%s", base ? "." : "",
                         (const char *)ev.data.scalar.value);
                config_marks_add(mk, path, NULL, line);
                keymark[depth - 1] = (long)mk->n - 1;
                state[depth - 1] = 0;
                break;
            }
            config_marks_value(mk, keymark, depth, state, 's', &ev.start_mark);
            if (item) {
                config_marks_add(mk, path, (const char *)ev.data.scalar.value, line);
            } else if (depth > 0) {
                state[depth - 1] = 1; /* a value: the next scalar is a key */
                path[plen[depth - 1]] = '\0';
            }
            break;
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (key || depth == CONFIG_YAML_DEPTH) {
                done = 1; /* a complex key, or too deep: positions stop here */
                break;
            }
            config_marks_value(mk, keymark, depth, state,
                               ev.type == YAML_MAPPING_START_EVENT ? 'm' : 'l', &ev.start_mark);
            plen[depth] = strlen(path);
            state[depth] = ev.type == YAML_MAPPING_START_EVENT ? 1 : -1;
            keymark[depth] = -1;
            depth++;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            if (depth > 0) {
                depth--;
                path[plen[depth]] = '\0'; /* the path where the collection began */
            }
            if (depth > 0 && state[depth - 1] == 0) { /* it was a mapping's value */
                state[depth - 1] = 1;
                path[plen[depth - 1]] = '\0';
            }
            break;
        case YAML_ALIAS_EVENT:
            if (depth > 0 && state[depth - 1] == 0) {
                state[depth - 1] = 1;
                path[plen[depth - 1]] = '\0';
            }
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs == 2) {
                mk->doc2_line = line; /* libcyaml reads only the first */
                done = 1;
            }
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
}

/* The line of the nth key `path`, or with item, of the first entry `item`
 * of the sequence under the first such key (else the key's line); 0 if
 * not in the text. */
static int config_find_line(const config_marks_t *mk, const char *path, const char *item,
                            int nth)
{
    int seen = 0, line = 0;

    for (size_t i = 0; i < mk->n; i++) {
        const config_mark_t *m = &mk->m[i];
        if (strcmp(m->path, path) != 0) {
            continue;
        }
        if (m->item == NULL && line == 0 && ++seen == nth) {
            line = m->line;
            if (item == NULL || item[0] == '\0') {
                return line;
            }
        } else if (m->item != NULL && line != 0 && item != NULL && strcmp(m->item, item) == 0) {
            return m->line;
        }
    }
    return line;
}

/* ---- libcyaml schema: every leaf a string, all in one flat struct ----
 * Built from the registry at each load (the keys are the core's and the
 * transports'): a top-level key without a dot is a leaf, "a.b" a leaf b in
 * the mapping a. log.subsystems (a SUBSYS key) is a sequence of strings. */

typedef struct config_raw {
    char *v[CONFIG_MAX_KEYS];  /* NULL: key absent */
    char **seq;                /* the SUBSYS key's entries */
    unsigned seq_count;
} config_raw_t;

#define CONFIG_MAX_SECTIONS 32

typedef struct config_schema {
    cyaml_schema_field_t top[CONFIG_MAX_KEYS + 1];
    cyaml_schema_field_t child[CONFIG_MAX_KEYS + CONFIG_MAX_SECTIONS];
    char section[CONFIG_MAX_SECTIONS][CONFIG_KEY_MAX];
    cyaml_schema_value_t value;
} config_schema_t;

static const cyaml_schema_value_t raw_entry_schema = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static cyaml_schema_field_t config_schema_leaf(const char *name, config_id_t id)
{
    if (CFG_FIELD(id).kind == CFG_KIND_SUBSYS) {
        cyaml_schema_field_t f = CYAML_FIELD_SEQUENCE(
            "x", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, config_raw_t, seq, &raw_entry_schema,
            1, CYAML_UNLIMITED);
        f.key = name;
        return f;
    } else {
        cyaml_schema_field_t f = CYAML_FIELD_STRING_PTR(
            "x", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, config_raw_t, v[0], 0,
            CYAML_UNLIMITED);
        f.key = name;
        f.data_offset = (uint32_t)(offsetof(config_raw_t, v) + id * sizeof(char *));
        return f;
    }
}

/* Fills sc from the registry; the names point into the registry and sc. */
static void config_schema_build(config_schema_t *sc)
{
    size_t n = rmacoll__cfg_nkeys();
    size_t nt = 0, nc = 0, ns = 0;
    const cyaml_schema_field_t end = CYAML_FIELD_END;

    memset(sc, 0, sizeof(*sc));
    for (size_t id = 0; id < n; id++) {
        const char *key = CFG_KEY(id).key;
        const char *dot = strchr(key, '.');
        size_t plen;
        int seen = 0;

        if (dot == NULL) {
            sc->top[nt++] = config_schema_leaf(key, id);
            continue;
        }
        plen = (size_t)(dot - key);
        for (size_t k = 0; k < ns; k++) {
            seen |= strlen(sc->section[k]) == plen && strncmp(sc->section[k], key, plen) == 0;
        }
        if (seen || ns == CONFIG_MAX_SECTIONS || plen >= CONFIG_KEY_MAX) {
            continue;
        }
        /* A new section: every key with this prefix, in registry order. */
        memcpy(sc->section[ns], key, plen);
        sc->section[ns][plen] = '\0';
        {
            cyaml_schema_field_t m = {
                .key = sc->section[ns],
                .data_offset = 0,
                .value = {.type = CYAML_MAPPING, .flags = CYAML_FLAG_OPTIONAL,
                          .data_size = sizeof(config_raw_t),
                          .mapping = {.fields = &sc->child[nc]}},
            };
            sc->top[nt++] = m;
        }
        for (size_t j = id; j < n; j++) {
            const char *kj = CFG_KEY(j).key;
            if (strncmp(kj, key, plen) == 0 && kj[plen] == '.') {
                sc->child[nc++] = config_schema_leaf(kj + plen + 1, j);
            }
        }
        sc->child[nc++] = end;
        ns++;
    }
    sc->top[nt] = end;
    {
        cyaml_schema_value_t v = {
            CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, config_raw_t, sc->top),
        };
        sc->value = v;
    }
}

/* ---- capturing libcyaml's error log ---- */

#define CONFIG_LOG_MAX_FIELDS 8

typedef struct config_cyaml_log {
    char msg[256];                                /* first error line */
    char fields[CONFIG_LOG_MAX_FIELDS][64];       /* backtrace, innermost first */
    int field_lines[CONFIG_LOG_MAX_FIELDS];
    int nfields;
    int line;                                     /* innermost line libcyaml gave */
} config_cyaml_log_t;

static void config_cyaml_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
    config_cyaml_log_t *lg = ctx;
    char buf[512];
    char *s = buf;
    const char *ln;
    size_t n;

    if (level < CYAML_LOG_ERROR) {
        return;
    }
    vsnprintf(buf, sizeof(buf), fmt, args);
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        buf[--n] = '\0';
    }
    if (strncmp(s, "Load: ", 6) == 0) {
        s += 6;
    }
    if (strcmp(s, "Backtrace:") == 0) {
        return;
    }
    ln = strstr(s, "(line: ");
    if (ln != NULL && lg->line == 0) {
        lg->line = atoi(ln + 7);
    }
    if (strncmp(s, "  in mapping field '", 20) == 0) {
        const char *name = s + 20;
        const char *q = strchr(name, '\'');
        if (q != NULL && lg->nfields < CONFIG_LOG_MAX_FIELDS) {
            snprintf(lg->fields[lg->nfields], sizeof(lg->fields[0]), "%.*s",
                     (int)(q - name), name);
            lg->field_lines[lg->nfields] = ln != NULL ? atoi(ln + 7) : 0;
            lg->nfields++;
        }
        return;
    }
    if (strncmp(s, "  in ", 5) == 0) {
        return;
    }
    if (lg->msg[0] == '\0') {
        rmacoll__cfg_copy(lg->msg, sizeof(lg->msg), s);
        lg->msg[0] = (char)tolower((unsigned char)lg->msg[0]); /* lower-case messages */
    }
}

/* The keys allowed under parent ("" = top level), for error messages. */
static void config_list_children(const char *parent, char *buf, size_t len)
{
    size_t off = 0;
    size_t plen = strlen(parent);
    char prev[64] = "";

    buf[0] = '\0';
    for (size_t k = 0; k < rmacoll__cfg_nkeys() && off < len; k++) {
        const char *key = CFG_KEY(k).key;
        char name[64];
        const char *dot;

        if (plen > 0) {
            if (strncmp(key, parent, plen) != 0 || key[plen] != '.') {
                continue;
            }
            snprintf(name, sizeof(name), "%s", key + plen + 1);
        } else {
            dot = strchr(key, '.');
            snprintf(name, sizeof(name), "%.*s", dot ? (int)(dot - key) : (int)strlen(key), key);
        }
        if (strcmp(name, prev) == 0) {
            continue;
        }
        snprintf(prev, sizeof(prev), "%s", name);
        int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", name);
        if (n < 0) {
            return;
        }
        off += (size_t)n;
    }
}

/* The type of key id, as rmacoll-info names it. */
static const char *config_kind_name(config_id_t id)
{
    switch (CFG_FIELD(id).kind) {
    case CFG_KIND_BOOL:
        return "bool";
    case CFG_KIND_U32:
        return "u32";
    case CFG_KIND_I32:
        return "i32";
    case CFG_KIND_U64:
        return "u64";
    case CFG_KIND_SIZE:
        return "size";
    case CFG_KIND_SUBSYS:
        return "list";
    case CFG_KIND_ENUM:
    case CFG_KIND_LEVEL:
        return "enum";
    default:
        return "string";
    }
}

/* libcyaml's "expecting STRING, got event: MAPPING_START" (a map or list
 * where a value goes, a value or list where a section's map goes) as what
 * the key expects and what it got, at the value's line and column; 0 when
 * msg is not one of those. */
static int config_structure_error(const char *msg, const char *path, const char *file,
                                  const config_marks_t *mk, char *errbuf, size_t errlen)
{
    static const char *const got_names[][2] = {
        {"MAPPING_START", "a map"}, {"SEQUENCE_START", "a list"}, {"SCALAR", "a scalar"},
        {"ALIAS", "an alias"}};
    const char *got = strstr(msg, ", got event: ");
    const char *gotw = NULL;
    const config_mark_t *m = NULL;
    char want[600];

    if (strncmp(msg, "expecting ", 10) != 0 || got == NULL) {
        return 0;
    }
    for (size_t k = 0; k < sizeof(got_names) / sizeof(got_names[0]); k++) {
        if (strcmp(got + 13, got_names[k][0]) == 0) {
            gotw = got_names[k][1];
        }
    }
    for (size_t i = 0; i < mk->n && path[0] != '\0'; i++) {
        if (mk->m[i].item == NULL && strcmp(mk->m[i].path, path) == 0) {
            m = &mk->m[i];
            break;
        }
    }
    if (gotw == NULL || m == NULL || m->vline == 0) {
        return 0; /* the top level, or positions lost: libcyaml's words */
    }
    if (strncmp(msg + 10, "MAPPING,", 8) == 0) {
        char known[512];
        config_list_children(path, known, sizeof(known));
        snprintf(want, sizeof(want), "a map of its keys (%s)", known);
    } else {
        const char *type = "string";
        for (size_t id = 0; id < rmacoll__cfg_nkeys(); id++) {
            if (strcmp(CFG_KEY(id).key, path) == 0) {
                type = config_kind_name((config_id_t)id);
            }
        }
        snprintf(want, sizeof(want), "a %s value", type);
    }
    rmacoll__errbuf_printf(errbuf, errlen, "config file '%s' line %d column %d: key '%s' "
                           "expects %s, got %s", file, m->vline, m->vcol, path, want, gotw);
    return 1;
}

/* Turns what libcyaml logged into one message naming the key and its line. */
static void config_cyaml_error(const config_cyaml_log_t *lg, cyaml_err_t err, const char *file,
                               const config_marks_t *mk, char *errbuf, size_t errlen)
{
    char path[256] = "";
    size_t off = 0;
    int line;

    /* Backtrace is innermost first; the path reads outermost first. */
    for (int k = lg->nfields - 1; k >= 0 && off < sizeof(path); k--) {
        off += (size_t)snprintf(path + off, sizeof(path) - off, "%s%s", off ? "." : "",
                                lg->fields[k]);
    }
    if (strncmp(lg->msg, "unexpected key: ", 16) == 0) {
        const char *key = lg->msg + 16;
        char full[320];
        char known[512];

        snprintf(full, sizeof(full), "%s%s%s", path, path[0] ? "." : "", key);
        line = config_find_line(mk, full, NULL, 1);
        if (line == 0) {
            line = lg->line > 0 ? lg->line : 1;
        }
        config_list_children(path, known, sizeof(known));
        rmacoll__errbuf_printf(errbuf, errlen,
                               "config file '%s' line %d: unknown key '%s' (known: %s)",
                               file, line, full, known);
        return;
    }
    if (config_structure_error(lg->msg, path, file, mk, errbuf, errlen)) {
        return;
    }
    line = 0;
    if (path[0] && strncmp(lg->msg, "mapping field already seen", 26) == 0) {
        line = config_find_line(mk, path, NULL, 2); /* the duplicate */
    }
    if (line == 0) {
        line = path[0] ? config_find_line(mk, path, NULL, 1) : 0;
    }
    if (line == 0) {
        line = lg->line > 0 ? lg->line : 1;
    }
    rmacoll__errbuf_printf(errbuf, errlen, "config file '%s' line %d: %s%s%s", file, line, path,
                           path[0] ? ": " : "", lg->msg[0] ? lg->msg : cyaml_strerror(err));
}

/* ---- loading ---- */

#define CONFIG_FILE_MAX (1u << 20)

static rmacoll_status_t config_read_file(const char *file, char **text, size_t *len,
                                         char *errbuf, size_t errlen)
{
    FILE *fp = fopen(file, "rb");
    char *buf;
    size_t n;

    if (fp == NULL) {
        rmacoll__errbuf_printf(errbuf, errlen,
                               "cannot open config file '%s': %s", file, strerror(errno));
        return RMACOLL_ERR_CONFIG;
    }
    buf = malloc(CONFIG_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(fp);
        rmacoll__errbuf_printf(errbuf, errlen, "no memory to read config file '%s'", file);
        return RMACOLL_ERR_NO_MEMORY;
    }
    n = fread(buf, 1, CONFIG_FILE_MAX + 1, fp);
    if (ferror(fp) || n > CONFIG_FILE_MAX) {
        rmacoll__errbuf_printf(errbuf, errlen, "cannot read config file '%s': %s", file,
                               n > CONFIG_FILE_MAX ? "larger than 1 MiB" : strerror(errno));
        fclose(fp);
        free(buf);
        return RMACOLL_ERR_CONFIG;
    }
    fclose(fp);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return RMACOLL_SUCCESS;
}

static int config_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Is the text only blanks and comments (libyaml then gives no document)? */
static int config_text_empty(const char *t, size_t len)
{
    int in_comment = 0;

    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\n') {
            in_comment = 0;
        } else if (t[i] == '#') {
            in_comment = 1;
        } else if (!in_comment && !config_is_space(t[i])) {
            return 0;
        }
    }
    return 1;
}

/* Applies each key the file set, with its line into lines[id] (an error
 * names the line of the offending list entry when there is one). */
static rmacoll_status_t config_apply_raw(rmacoll_config_t *cfg, const config_raw_t *raw,
                                         const config_marks_t *marks, int *lines,
                                         const char *file, char *errbuf, size_t errlen)
{
    rmacoll_status_t st;

    st = RMACOLL_SUCCESS;
    for (size_t id = 0; raw != NULL && id < rmacoll__cfg_nkeys() && st == RMACOLL_SUCCESS; id++) {
        char joined[512];
        char problem[320];
        char bad[64];
        const char *val = raw->v[id];

        if (CFG_FIELD(id).kind == CFG_KIND_SUBSYS && raw->seq != NULL) {
            size_t off = 0;
            joined[0] = '\0';
            for (unsigned k = 0; k < raw->seq_count && off < sizeof(joined); k++) {
                off += (size_t)snprintf(joined + off, sizeof(joined) - off, "%s%s",
                                        k ? "," : "", raw->seq[k]);
            }
            val = joined;
        }
        if (val == NULL) {
            continue;
        }
        lines[id] = config_find_line(marks, CFG_KEY(id).key, NULL, 1);
        if (lines[id] == 0) {
            lines[id] = 1;
        }
        st = rmacoll__cfg_set(cfg, id, val, problem, sizeof(problem), bad, sizeof(bad));
        if (st != RMACOLL_SUCCESS) {
            int line = bad[0] ? config_find_line(marks, CFG_KEY(id).key, bad, 1) : 0;
            rmacoll__errbuf_printf(errbuf, errlen, "config file '%s' line %d: %s: %s", file,
                                   line > 0 ? line : lines[id], CFG_KEY(id).key, problem);
        }
    }
    return st;
}

/* Applies the file; lines[id] receives the line of every key it set. */
rmacoll_status_t rmacoll__cfg_load_file(const char *file, rmacoll_config_t *cfg, int *lines,
                                        int lenient, char *errbuf, size_t errlen)
{
    config_cyaml_log_t lg;
    cyaml_config_t ycfg;
    config_schema_t *schema;
    config_raw_t *raw = NULL;
    char *text = NULL;
    size_t len = 0;
    config_marks_t marks;
    rmacoll_status_t st;
    cyaml_err_t err;

    st = config_read_file(file, &text, &len, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (config_text_empty(text, len)) {
        free(text);
        return RMACOLL_SUCCESS;
    }
    schema = malloc(sizeof(*schema));
    if (schema == NULL) {
        free(text);
        rmacoll__errbuf_printf(errbuf, errlen, "no memory to read config file '%s'", file);
        return RMACOLL_ERR_NO_MEMORY;
    }
    config_schema_build(schema);
    config_marks_build(text, len, &marks);
    if (marks.doc2_line > 0) {
        rmacoll__errbuf_printf(errbuf, errlen, "config file '%s' line %d: a second YAML "
                               "document starts here; a config file holds one document "
                               "(rmacoll would ignore this one)", file, marks.doc2_line);
        config_marks_free(&marks);
        free(schema);
        free(text);
        return RMACOLL_ERR_CONFIG;
    }
    memset(&lg, 0, sizeof(lg));
    memset(&ycfg, 0, sizeof(ycfg));
    ycfg.log_fn = config_cyaml_log;
    ycfg.log_ctx = &lg;
    ycfg.mem_fn = cyaml_mem;
    ycfg.log_level = CYAML_LOG_ERROR;
    ycfg.flags = lenient ? CYAML_CFG_IGNORE_UNKNOWN_KEYS : CYAML_CFG_DEFAULT;
    err = cyaml_load_data((const uint8_t *)text, len, &ycfg, &schema->value,
                          (cyaml_data_t **)&raw, NULL);
    if (err != CYAML_OK) {
        config_cyaml_error(&lg, err, file, &marks, errbuf, errlen);
        config_marks_free(&marks);
        free(schema);
        free(text);
        return err == CYAML_ERR_OOM ? RMACOLL_ERR_NO_MEMORY : RMACOLL_ERR_CONFIG;
    }

    st = config_apply_raw(cfg, raw, &marks, lines, file, errbuf, errlen);
    cyaml_free(&ycfg, &schema->value, raw, 0);
    config_marks_free(&marks);
    free(schema);
    free(text);
    return st;
}
