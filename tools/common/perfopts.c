/*
 * perfopts.c - rmacoll-perf's and the MPI baseline's command line:
 * defaults, usage, nccl-tests' options and ours, type names and --nodes
 * (see perfrun.h).
 */
#include "perfrun.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_internal.h"

void rmacoll_perf_opts_init(rmacoll_perf_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->np = 4;
    o->ppn = 2;
    o->timeout_s = 600;
    o->relay = -1;   /* the config's: on by default */
    o->minbytes = 1024;
    o->maxbytes = 16u << 20;
    o->stepfactor = 4;
    snprintf(o->dist, sizeof(o->dist), "zipf:1.2");
    o->dtype = RMACOLL_FLOAT32;
    o->iters = 20;
    o->warmup = 5;
    o->check = 1;
    o->seed = 1;
    o->gemm_iters = 50;
    o->agg_iters = 1;
    o->run_cycles = 1;
    o->average = 1;   /* nccl-tests' default: the mean over ranks */
}

/* Long because: one usage text, printed by one call. */
void rmacoll_perf_usage(const char *prog, FILE *out)
{
    /* the schedulers compiled in, from the registry: "a | b | c" */
    const char *names = rmacoll_build_schedulers();
    char scheds[512];
    size_t o = 0;

    for (const char *c = names; *c != '\0' && o + 4 < sizeof(scheds); c++) {
        if (*c == ',') {
            o += (size_t)snprintf(scheds + o, sizeof(scheds) - o, " | ");
        } else {
            scheds[o++] = *c;
        }
    }
    scheds[o] = '\0';
    fprintf(out,
"usage: %s [options]\n"
"AlltoAllV benchmark; takes nccl-tests' alltoall_perf command lines and prints\n"
"its columns (out-of-place and in-place), plus rmacoll's own options.\n"
"\n"
"Launch (rmacoll-perf; ignored by the MPI baseline):\n"
"  -np N, --nranks N      local ranks to spawn (default 4)\n"
"  --ppn N                ranks per virtual node, node = rank / ppn (default 2)\n"
"  --topology A,B,...     uneven virtual nodes, e.g. 3,2 (overrides -np/--ppn)\n"
"  --nodes I,J,...        node of every rank, e.g. 0,1,0,1 (non-contiguous\n"
"                         nodes; overrides -np/--ppn/--topology)\n"
"  --timeout S, -T S      launcher deadline in seconds (default 600)\n"
"  --spawn                spawn even when launcher variables are set\n"
"  --dry-run              spawn the ranks, print what each got, stop\n"
"  Under mpirun/srun/torchrun (OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID,\n"
"  RANK) nothing is spawned: rmacoll_comm_create_from_env bootstraps.\n"
"Runtime (rmacoll-perf):\n"
"  --config FILE          YAML configuration (else RMACOLL_CONFIG)\n"
"  --relay on|off         two-hop relay across nodes (default: the\n"
"                         config's relay.enabled, which defaults to on)\n"
"  --scheduler NAME       %s\n"
"  --intra NAME, --inter NAME   transports inside / across nodes\n"
"  --buffers host|cuda    buffers in host memory (default) or CUDA device\n"
"                         memory: rank uses GPU local_rank %% device count;\n"
"                         cuda defaults to one node of -np 2 ranks\n"
"                         (--memory host|cuda is the old name, kept)\n"
"  --baseline none|nccl   also time NCCL grouped ncclSend/ncclRecv on the\n"
"                         same counts (needs --buffers cuda, one rank per\n"
"                         GPU); prints both rows and the busbw ratio\n"
"  --gemm N               SM interference (needs --buffers cuda): time K\n"
"                         bf16 N x N GEMMs (cuBLAS) on a second stream alone,\n"
"                         then while the -b size runs back to back on the\n"
"                         collective's stream (and the baseline's); prints\n"
"                         the GEMM slowdown and the busbw; implies --no-check\n"
"  --gemm-iters K         GEMMs per timed batch (default 50)\n"
"Benchmark (nccl-tests' flags and meanings):\n"
"  -b, --minbytes SIZE    smallest bytes per rank sent in total (default 1K)\n"
"  -e, --maxbytes SIZE    largest (default 16M)\n"
"  -f, --stepfactor F     multiply the size by F per row (default 4)\n"
"  -i, --stepbytes SIZE   add SIZE per row instead of -f\n"
"  -d, --datatype NAME    float half double bfloat16 int8 uint8 int32 uint32\n"
"                         int64 uint64 (or float32 float16 float64), or all\n"
"                         (default float)\n"
"  -n, --iters N          timed iterations per row (default 20)\n"
"  -w, --warmup_iters N   warm-up iterations per row (default 5)\n"
"  -m, --agg_iters N      calls per timed iteration (default 1)\n"
"  -N, --run_cycles N     sweeps over the sizes, 0 = until killed (default 1)\n"
"  -c, --check N          after the timed iterations, N checked ones (fresh\n"
"                         data, not timed; nccl-tests' meaning; default 1)\n"
"  --no-check             same as -c 0\n"
"  --check-every          fill and check every timed iteration instead, each\n"
"                         call timed alone after a barrier\n"
"  -a, --average 0|1|2|3  time over ranks: rank 0, mean, min, max (default 1,\n"
"                         the mean, as nccl-tests)\n"
"  -z, --blocking 0|1     wait for each call (device memory; host calls\n"
"                         always block)\n"
"  -C, --report_cputime 0|1  time on the host clock also with device memory\n"
"                         (the time columns are then headed cputime)\n"
"  -S, --report_timestamps 0|1  a timestamp column after in-place\n"
"  -M, --memory_report 0|1   print the largest buffers of any rank\n"
"  -J, --output_file FILE  write nccl-tests' JSON document (its keys, rmacoll's\n"
"                         extras under \"rmacoll\"); an existing FILE is kept\n"
"                         and FILE.0, FILE.1, ... written instead, as\n"
"                         nccl-tests; FILE - = stdout (the table on stderr)\n"
"  --json FILE            rmacoll's own JSON document (docs/perf.md), FILE\n"
"                         overwritten; - = stdout (the table on stderr)\n"
"  -t, --nthreads 1  -g, --ngpus 1   one rank per process and GPU: only 1\n"
"  -G, --cudagraph, --graph N   CUDA graphs (--buffers cuda, one node): the\n"
"                         -m calls of an iteration captured into one graph\n"
"                         per row, each timed iteration N launches of it;\n"
"                         time per call (default 0: no graph)\n"
"  -R, --local_register 0|1|2   1 or 2: host send and receive buffers from\n"
"                         the tool's allocator of registered memory\n"
"                         (rmacoll_mem_alloc; MPI_Alloc_mem in the MPI\n"
"                         baseline), as nccl-tests takes them from\n"
"                         ncclMemAlloc; --buffers host only (default 0:\n"
"                         posix_memalign)\n"
"  -o, --op, -r, --root, -p, --parallel_init: accepted and ignored (no\n"
"                         reduction, no root, no threads)\n"
"  -y, --stream_null 0    only 0: the calls never run on the CUDA default\n"
"                         stream\n"
"  -D, --device_implementation 0   only 0 (NCCL device-API kernels: none)\n"
"  -V, --device_cta_count N   accepted and ignored, as by nccl-tests without\n"
"                         -D (1..128)\n"
"  -u, --unalign 0        only 0: the buffers are page-aligned\n"
"  -x, --cta_policy       refused: an NCCL kernel setting; rmacoll-perf's\n"
"                         collective launches no NCCL kernel\n"
"  --dist SPEC            uniform | random | zipf:ALPHA | sparse:P |\n"
"                         matrix:FILE (default zipf:1.2); see docs/perf.md\n"
"  --seed N               seed of the count generator (default 1)\n"
"  -q, --quiet            rows only, no header\n"
"  -h, --help             this text\n"
"SIZE: bytes with K/M/G suffixes (powers of 1024), fractions allowed (1.5M).\n"
"In-place columns are left blank (nccl-tests' not-measured filler; null in\n"
"-J's JSON): not measured.\n"
"  --in-place blank|na    na: print N/A in them instead (parsers that index\n"
"                         the out-of-place columns from the end of the row,\n"
"                         as SuperBench's nccl-bw does, need all 13 fields)\n"
"Exit status: 0 ok, 1 a rank failed, 2 wrong data, 64 bad usage.\n",
            prog, scheds);
}

static int perf_int(const char *s, long lo, long hi, int *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int perf_onoff(const char *s, int *out)
{
    if (!strcmp(s, "on") || !strcmp(s, "1") || !strcmp(s, "true") ||
        !strcmp(s, "yes"))
        *out = 1;
    else if (!strcmp(s, "off") || !strcmp(s, "0") || !strcmp(s, "false") ||
             !strcmp(s, "no"))
        *out = 0;
    else
        return -1;
    return 0;
}

static int perf_copy(char *dst, size_t len, const char *src)
{
    if (strlen(src) >= len)
        return -1;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

/* nccl-tests' type names, in its -d all order, and ours. */
static const struct {
    const char *nccl;
    rmacoll_datatype_t dt;
} perf_types[] = {
    {"int8", RMACOLL_INT8},       {"uint8", RMACOLL_UINT8},
    {"int32", RMACOLL_INT32},     {"uint32", RMACOLL_UINT32},
    {"int64", RMACOLL_INT64},     {"uint64", RMACOLL_UINT64},
    {"half", RMACOLL_FLOAT16},    {"float", RMACOLL_FLOAT32},
    {"double", RMACOLL_FLOAT64},  {"bfloat16", RMACOLL_BFLOAT16},
};
_Static_assert(sizeof(perf_types) / sizeof(perf_types[0]) == PERF_NTYPES,
               "PERF_NTYPES (perf_internal.h) counts perf_types");

rmacoll_datatype_t perf_type_at(int i)
{
    return perf_types[i].dt;
}

const char *rmacoll_perf_type_name(rmacoll_datatype_t d)
{
    for (int i = 0; i < PERF_NTYPES; i++)
        if (perf_types[i].dt == d)
            return perf_types[i].nccl;
    return rmacoll_datatype_name(d) != NULL ? rmacoll_datatype_name(d) : "?";
}

static int perf_dtype(const char *s, rmacoll_datatype_t *out)
{
    for (int i = 0; i < PERF_NTYPES; i++)
        if (!strcmp(s, perf_types[i].nccl)) {
            *out = perf_types[i].dt;
            return 0;
        }
    if (!strcmp(s, "char"))   /* nccl-tests' alias of int8 */
        s = "int8";
    else if (!strcmp(s, "f8e4m3"))  /* nccl-tests' FP8 names */
        s = "float8_e4m3";
    else if (!strcmp(s, "f8e5m2"))
        s = "float8_e5m2";
    return rmacoll_datatype_from_name(s, out) == RMACOLL_SUCCESS ? 0 : -1;
}

int rmacoll_perf_parse_nodes(const char *spec, int *node_of, int max_ranks,
                             int *nranks)
{
    const char *p = spec;
    int n = 0;

    if (spec == NULL || *spec == '\0')
        return -1;
    while (*p != '\0') {
        char *end = NULL;
        long v;

        errno = 0;
        v = strtol(p, &end, 10);
        if (errno != 0 || end == p || v < 0 || v > 1000000 || n >= max_ranks)
            return -1;
        node_of[n++] = (int)v;
        if (*end == ',' && end[1] != '\0')
            end++;
        else if (*end != '\0')
            return -1;
        p = end;
    }
    *nranks = n;
    return 0;
}

/* Long options; single-dash long names (-np, -ppn) work too
 * (getopt_long_only). Values above 255 are options without a short
 * letter. */
enum {
    PO_NP = 256, PO_PPN, PO_TOPOLOGY, PO_NODES, PO_TIMEOUT, PO_SPAWN,
    PO_DRY_RUN, PO_CONFIG, PO_RELAY, PO_SCHEDULER, PO_INTRA, PO_INTER,
    PO_BUFFERS, PO_MEMORY, PO_BASELINE, PO_GEMM, PO_GEMM_ITERS, PO_DIST,
    PO_SEED, PO_JSON, PO_NO_CHECK, PO_CHECK_ON, PO_CHECK_EVERY, PO_IN_PLACE
};

static const struct option perf_longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {"np", required_argument, NULL, PO_NP},
    {"nranks", required_argument, NULL, PO_NP},
    {"ppn", required_argument, NULL, PO_PPN},
    {"topology", required_argument, NULL, PO_TOPOLOGY},
    {"nodes", required_argument, NULL, PO_NODES},
    {"timeout", required_argument, NULL, PO_TIMEOUT},
    {"spawn", no_argument, NULL, PO_SPAWN},
    {"dry-run", no_argument, NULL, PO_DRY_RUN},
    {"config", required_argument, NULL, PO_CONFIG},
    {"relay", required_argument, NULL, PO_RELAY},
    {"scheduler", required_argument, NULL, PO_SCHEDULER},
    {"intra", required_argument, NULL, PO_INTRA},
    {"inter", required_argument, NULL, PO_INTER},
    {"buffers", required_argument, NULL, PO_BUFFERS},
    {"memory", required_argument, NULL, PO_MEMORY},
    {"baseline", required_argument, NULL, PO_BASELINE},
    {"gemm", required_argument, NULL, PO_GEMM},
    {"gemm-iters", required_argument, NULL, PO_GEMM_ITERS},
    {"dist", required_argument, NULL, PO_DIST},
    {"seed", required_argument, NULL, PO_SEED},
    {"json", required_argument, NULL, PO_JSON},
    {"output_file", required_argument, NULL, 'J'},
    {"stream_null", required_argument, NULL, 'y'},
    {"report_timestamps", required_argument, NULL, 'S'},
    {"cta_policy", required_argument, NULL, 'x'},
    {"device_implementation", required_argument, NULL, 'D'},
    {"device_cta_count", required_argument, NULL, 'V'},
    {"unalign", required_argument, NULL, 'u'},
    {"no-check", no_argument, NULL, PO_NO_CHECK},
    {"check-every", no_argument, NULL, PO_CHECK_EVERY},
    {"in-place", required_argument, NULL, PO_IN_PLACE},
    {"quiet", no_argument, NULL, 'q'},
    /* nccl-tests */
    {"nthreads", required_argument, NULL, 't'},
    {"ngpus", required_argument, NULL, 'g'},
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepbytes", required_argument, NULL, 'i'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},
    {"agg_iters", required_argument, NULL, 'm'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"warmup", required_argument, NULL, 'w'},
    {"parallel_init", required_argument, NULL, 'p'},
    {"check", optional_argument, NULL, PO_CHECK_ON},
    {"op", required_argument, NULL, 'o'},
    {"datatype", required_argument, NULL, 'd'},
    {"dtype", required_argument, NULL, 'd'},
    {"root", required_argument, NULL, 'r'},
    {"blocking", required_argument, NULL, 'z'},
    {"cudagraph", required_argument, NULL, 'G'},
    {"graph", required_argument, NULL, 'G'},
    {"report_cputime", required_argument, NULL, 'C'},
    {"average", required_argument, NULL, 'a'},
    {"local_register", required_argument, NULL, 'R'},
    {"memory_report", required_argument, NULL, 'M'},
    {"run_cycles", required_argument, NULL, 'N'},
    {NULL, 0, NULL, 0},
};

/* The option's name as the user wrote it (argv element before any "="),
 * for messages; call right after getopt returned it. */
static const char *perf_optname(char **argv, const char *val, char *buf,
                                size_t len)
{
    int idx = optind - 1;
    const char *a;
    size_t n;

    /* "-b 8": the value is its own element, the name the one before. */
    if (val != NULL && idx > 0 && argv[idx] == val)
        idx--;
    if (idx < 1 || argv[idx] == NULL)
        return "?";
    a = argv[idx];
    n = strcspn(a, "=");
    snprintf(buf, len, "%.*s", (int)(n < 60 ? n : 60), a);
    return buf;
}

/* Whether the argument that named long option `full` gave only a prefix
 * of it ("-loc" for "local_register"); its text goes to buf. */
static int perf_opt_abbrev(char **argv, const char *val, const char *full, char *buf,
                           size_t len)
{
    const char *a = perf_optname(argv, val, buf, len);
    size_t n;

    while (*a == '-')
        a++;
    n = strcspn(a, "=");
    return n != strlen(full) || strncmp(a, full, n) != 0;
}

static int perf_size(const char *v, uint64_t *out)
{
    return rmacoll_parse_size(v, out) == RMACOLL_SUCCESS ? 0 : -1;
}

static int perf_double(const char *v, double lo, double *out)
{
    char *end = NULL;
    double d;

    errno = 0;
    d = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(d >= lo))
        return -1;
    *out = d;
    return 0;
}
/* --json FILE: the file must be writable, or creatable in an existing
 * folder, before anything runs (nothing is created here). 0, or -1 with
 * err naming the path. */
static int perf_json_writable(const char *opt, const char *path, char *err,
                              size_t errlen)
{
    char dir[RMACOLL_PERF_STR];
    const char *slash = strrchr(path, '/');

    struct stat sb;

    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s %s: is a directory, not a file", opt, path);
        return -1;
    }
    if (access(path, F_OK) == 0) {
        if (access(path, W_OK) == 0)
            return 0;
        snprintf(err, errlen, "%s %s: cannot write the file: %s", opt, path,
                 strerror(errno));
        return -1;
    }
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "%s %s: cannot create the file in %s: %s", opt, path, dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}


/* The launch and runtime options: 1 when c is one of them, with *bad set
 * when its value is wrong; 0 otherwise. */
static int perf_opt_launch(int c, const char *v, rmacoll_perf_opts_t *o, int *bad)
{
    switch (c) {
    case PO_NP:
        *bad = perf_int(v, 1, 1024, &o->np);
        o->topology_given = o->np_given = 1;
        break;
    case PO_PPN:
        *bad = perf_int(v, 1, 1024, &o->ppn);
        o->topology_given = o->ppn_given = 1;
        break;
    case PO_TOPOLOGY:
        *bad = perf_copy(o->topology, sizeof(o->topology), v);
        o->topology_given = 1;
        break;
    case PO_NODES: {
        int tmp[1024], n = 0;

        *bad = rmacoll_perf_parse_nodes(v, tmp, 1024, &n) ||
               perf_copy(o->nodes, sizeof(o->nodes), v);
        o->topology_given = 1;
        break;
    }
    case PO_TIMEOUT:
    case 'T':
        *bad = perf_double(v, 0, &o->timeout_s);
        break;
    case PO_SPAWN: o->force_spawn = 1; break;
    case PO_DRY_RUN: o->dry_run = 1; break;
    case PO_CONFIG:
        *bad = perf_copy(o->config_path, sizeof(o->config_path), v);
        break;
    case PO_RELAY: *bad = perf_onoff(v, &o->relay); break;
    case PO_SCHEDULER:
        *bad = perf_copy(o->scheduler, sizeof(o->scheduler), v);
        break;
    case PO_INTRA:
        *bad = perf_copy(o->intra_node, sizeof(o->intra_node), v);
        break;
    case PO_INTER:
        *bad = perf_copy(o->inter_node, sizeof(o->inter_node), v);
        break;
    default:
        return 0;
    }
    return 1;
}

/* The buffers, baseline, load, counts, output and checking options of
 * rmacoll-perf's own: 1 when c is one of them, with *bad set when its
 * value is wrong; 0 otherwise. */
static int perf_opt_bench(int c, const char *v, rmacoll_perf_opts_t *o, int *bad)
{
    switch (c) {
    case PO_MEMORY:
        /* Old name of --buffers; --memory 0|1 is what nccl-tests'
         * getopt_long makes of an abbreviated --memory_report. */
        if (!strcmp(v, "0") || !strcmp(v, "1")) {
            o->memory_report = v[0] == '1';
            break;
        }
        /* fall through */
    case PO_BUFFERS:
        if (!strcmp(v, "host"))
            o->memory = RMACOLL_PERF_MEM_HOST;
        else if (!strcmp(v, "cuda"))
            o->memory = RMACOLL_PERF_MEM_CUDA;
        else
            *bad = 1;
        break;
    case PO_BASELINE:
        *bad = (strcmp(v, "none") != 0 && strcmp(v, "nccl") != 0) ||
               perf_copy(o->baseline, sizeof(o->baseline), v);
        break;
    case PO_GEMM: *bad = perf_int(v, 16, 65536, &o->gemm_n); break;
    case PO_GEMM_ITERS:
        *bad = perf_int(v, 1, 1000000, &o->gemm_iters);
        break;
    case PO_DIST: *bad = perf_copy(o->dist, sizeof(o->dist), v); break;
    case PO_SEED: {
        char *end = NULL;

        errno = 0;
        o->seed = strtoull(v, &end, 0);
        *bad = errno != 0 || end == v || *end != '\0';
        break;
    }
    case 'J':
        *bad = v[0] == '\0' ||
               perf_copy(o->nccl_json_path, sizeof(o->nccl_json_path), v);
        o->nccl_json_stdout = !strcmp(v, "-");
        break;
    case PO_JSON:
        *bad = v[0] == '\0' || perf_copy(o->json_path, sizeof(o->json_path), v);
        o->json_stdout = !strcmp(v, "-");
        break;
    case PO_NO_CHECK: o->check = 0; o->check_every = 0; break; /* turns both off */
    case PO_CHECK_EVERY:
        o->check_every = 1;
        if (o->check == 0)
            o->check = 1;
        break;
    case 'q': o->quiet = 1; break;
    case PO_IN_PLACE:
        if (!strcmp(v, "blank") || !strcmp(v, "na"))
            o->inplace_na = v[0] == 'n';
        else
            *bad = 1;
        break;
    default:
        return 0;
    }
    return 1;
}

/* -y, -D, -u with a value other than 0: -1 with err saying why only 0. */
static int perf_opt_only0(int c, const char *v, char *err, size_t errlen)
{
    switch (c) {
    case 'y':
        snprintf(err, errlen, "-y %s (--stream_null): rmacoll-perf never runs "
                 "the collective on the CUDA default stream (device memory: "
                 "its own stream; host memory: no stream); only -y 0", v);
        break;
    case 'D':
        snprintf(err, errlen, "-D %s (--device_implementation): nccl-tests' "
                 "NCCL device-API kernels; rmacoll-perf has only rmacoll's "
                 "implementation; only -D 0", v);
        break;
    default:
        snprintf(err, errlen, "-u %s (--unalign): misaligned buffers are not "
                 "supported (rmacoll-perf's buffers start page-aligned); only "
                 "-u 0", v);
        break;
    }
    return -1;
}

/* nccl-tests' options: 1 when c is one of them, with *bad set when its
 * value is wrong (*vp: the value, which --check may take from the next
 * element); -1 with err set for -t/-g other than 1; 0 otherwise. */
static int perf_opt_nccl(int c, const char **vp, int argc, char **argv,
                         rmacoll_perf_opts_t *o, char *err, size_t errlen,
                         int *bad)
{
    const char *v = *vp;
    int iv = 0;

    switch (c) {
    case 't':
    case 'g':
        *bad = perf_int(v, 1, 1024, &iv);
        if (!*bad && iv != 1) {
            snprintf(err, errlen, "%s %s: rmacoll-perf runs one rank per "
                     "process and one GPU per rank; start more ranks with "
                     "-np or the launcher",
                     c == 't' ? "-t" : "-g", v);
            return -1;
        }
        break;
    case 'G': *bad = perf_int(v, 0, 1000000, &o->graph_launches); break;
    case 'b': *bad = perf_size(v, &o->minbytes); break;
    case 'e': *bad = perf_size(v, &o->maxbytes); break;
    case 'i':
        *bad = perf_size(v, &o->stepbytes) || o->stepbytes == 0;
        break;
    case 'f':
        *bad = perf_double(v, 0, &o->stepfactor) || !(o->stepfactor > 1.0);
        break;
    case 'n': *bad = perf_int(v, 1, 1000000000, &o->iters); break;
    case 'm': *bad = perf_int(v, 1, 1000000, &o->agg_iters); break;
    case 'w': *bad = perf_int(v, 0, 1000000000, &o->warmup); break;
    case 'N': *bad = perf_int(v, 0, 1000000000, &o->run_cycles); break;
    case PO_CHECK_ON:   /* --check alone = on; --check V / --check=V as -c V */
        if (v == NULL && optind < argc && argv[optind][0] >= '0' &&
            argv[optind][0] <= '9')
            *vp = v = argv[optind++]; /* nccl-tests' "--check 0" */
        /* fall through */
    case 'c':           /* -c N: N checked iterations (nccl-tests) */
        if (v == NULL)
            o->check = 1;
        else if (perf_onoff(v, &o->check) != 0)
            *bad = perf_int(v, 0, 1000000, &o->check);
        if (!*bad && o->check == 0)
            o->check_every = 0; /* -c 0 is --no-check: the last option wins */
        break;
    case 'd':
        if (!strcmp(v, "all")) {
            o->dtype_all = 1;
        } else {
            *bad = perf_dtype(v, &o->dtype);
            o->dtype_all = 0;
        }
        o->dtype_given = 1;
        break;
    case 'a': *bad = perf_int(v, 0, 3, &o->average); break;
    case 'z': *bad = perf_onoff(v, &o->blocking); break;
    case 'C': *bad = perf_onoff(v, &o->cputime); break;
    case 'M': *bad = perf_onoff(v, &o->memory_report); break;
    case 'o':   /* reduction: none in an AlltoAllV */
    case 'r':   /* root: none */
    case 'p':   /* parallel init of threads: one thread per process */
        break;
    case 'R': *bad = perf_int(v, 0, 2, &o->local_register); break;
    case 'S': *bad = perf_onoff(v, &o->report_timestamps); break;
    case 'V':   /* CTAs of -D's kernels: no effect without them, as in nccl-tests */
        *bad = perf_int(v, 1, 128, &iv);
        break;
    case 'y':
    case 'D':
    case 'u':
        *bad = perf_int(v, 0, 1 << 30, &iv);
        if (!*bad && iv != 0)
            return perf_opt_only0(c, v, err, errlen);
        break;
    case 'x':
        snprintf(err, errlen, "-x %s (--cta_policy): NCCL's CTA policy applies "
                 "to NCCL kernels, and rmacoll-perf's collective launches none "
                 "(the --baseline nccl row runs at NCCL's default); drop -x", v);
        return -1;
    default:
        return 0;
    }
    return 1;
}

/* The options that contradict each other or the sizes, and a --json file
 * that cannot be written: 0, or -1 with err set. */
static int perf_opts_conflicts(int argc, char **argv, rmacoll_perf_opts_t *o,
                               char *err, size_t errlen)
{
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument %s (see --help)",
                 argv[optind]);
        return -1;
    }
    if (o->minbytes > o->maxbytes) {
        snprintf(err, errlen, "-b %llu is larger than -e %llu",
                 (unsigned long long)o->minbytes,
                 (unsigned long long)o->maxbytes);
        return -1;
    }
    if (o->json_path[0] != '\0' && !o->json_stdout &&
        perf_json_writable("--json", o->json_path, err, errlen) != 0)
        return -1;
    /* -J never overwrites (FILE.0, FILE.1, ... as nccl-tests): an existing
     * FILE is fine, its folder must take a new file. */
    if (o->nccl_json_path[0] != '\0' && !o->nccl_json_stdout &&
        perf_json_writable("-J", o->nccl_json_path, err, errlen) != 0 &&
        strstr(err, ": cannot write the file: ") == NULL)
        return -1;
    if (o->json_stdout && o->nccl_json_stdout) {
        snprintf(err, errlen, "-J - and --json -: only one JSON document can "
                 "go to stdout; write one of them to a file");
        return -1;
    }
    if (o->nccl_json_path[0] != '\0' && o->gemm_n > 0) {
        snprintf(err, errlen, "-J %s: --gemm's result has no nccl-tests "
                 "layout (one size, GEMM figures); use --json for it",
                 o->nccl_json_path);
        return -1;
    }
    if (!strcmp(o->baseline, "nccl") && o->memory != RMACOLL_PERF_MEM_CUDA) {
        snprintf(err, errlen, "--baseline nccl needs --buffers cuda");
        return -1;
    }
    if (o->gemm_n > 0 && o->memory != RMACOLL_PERF_MEM_CUDA) {
        snprintf(err, errlen, "--gemm needs --buffers cuda");
        return -1;
    }
    if (o->local_register && o->memory == RMACOLL_PERF_MEM_CUDA) {
        snprintf(err, errlen, "-R %d: registered buffers are host memory; "
                 "--buffers cuda allocates its own device buffers: use -R 0 "
                 "with it", o->local_register);
        return -1;
    }
    return 0;
}

/* The options' combined meaning (checking under --check-every and --gemm,
 * -G's needs, the one node of device memory, --dist): 0, or -1 with err
 * set. */
static int perf_opts_settle(rmacoll_perf_opts_t *o, char *err, size_t errlen)
{
    if (o->check_every && o->check == 0)
        o->check = 1;   /* --check-every is a mode of checking, whatever -c came after */
    if (o->gemm_n > 0) {
        o->check = 0;   /* calls are queued back to back: nothing to check */
        o->check_every = 0;
    }
    if (o->graph_launches > 0 &&
        (o->memory != RMACOLL_PERF_MEM_CUDA || o->blocking || o->gemm_n > 0)) {
        snprintf(err, errlen, "-G %d: CUDA graphs need --buffers cuda, and neither -z 1 "
                 "(a synchronisation cannot be captured) nor --gemm", o->graph_launches);
        return -1;
    }
    if (o->memory == RMACOLL_PERF_MEM_CUDA) {
        /* Device memory defaults to one node unless told. */
        if (!o->np_given)
            o->np = 2;
        if (!o->ppn_given)
            o->ppn = o->np;
    }
    if (strncmp(o->dist, "matrix:", 7) != 0) {
        rmacoll_case_dist_t d;

        if (rmacoll_case_dist_parse(o->dist, &d) != RMACOLL_SUCCESS) {
            snprintf(err, errlen,
                     "bad --dist %s (uniform, random, zipf:ALPHA, sparse:P, "
                     "matrix:FILE)",
                     o->dist);
            return -1;
        }
    }
    return 0;
}

/* An option getopt refused ('?' unknown, ':' value missing): err says it. */
static void perf_opt_refused(int c, char **argv, char *err, size_t errlen)
{
    char name[64];

    if (optopt > 0 && optopt < 256)
        snprintf(name, sizeof(name), "-%c", optopt);
    else
        perf_optname(argv, NULL, name, sizeof(name));
    if (c == '?')
        snprintf(err, errlen, "unknown option %s (see --help)", name);
    else
        snprintf(err, errlen, "option %s needs a value", name);
}

int rmacoll_perf_opts_parse(int argc, char **argv, rmacoll_perf_opts_t *o,
                            FILE *out, char *err, size_t errlen)
{
    static const char shortopts[] =
        "+:hqt:g:b:e:i:f:n:m:w:p:c:o:d:r:z:G:C:a:R:M:N:T:J:y:S:x:D:V:u:";
    char name[64];
    int c;

    o->argc = argc;  /* -J's "args" */
    o->argv = argv;
    optind = 0;      /* glibc: full re-initialisation (tests parse twice) */
    opterr = 0;
    for (;;) {
        int li = -1, bad = 0, known;
        const char *v;

        optopt = 0;
        c = getopt_long_only(argc, argv, shortopts, perf_longopts, &li);
        if (c == -1)
            break;
        v = optarg;
        if (c == 'h') {
            rmacoll_perf_usage(argv[0], out);
            return 1;
        }
        if (c == '?' || c == ':') {
            perf_opt_refused(c, argv, err, errlen);
            return -1;
        }
        if (li >= 0 && perf_opt_abbrev(argv, v, perf_longopts[li].name, name, sizeof(name))) {
            /* getopt_long_only takes any unique prefix ("-l" for
             * --local_register); nccl-tests' flags are exact */
            snprintf(err, errlen, "option %s is not an option of its own (it would abbreviate "
                     "--%s: give that name in full; see --help)", name,
                     perf_longopts[li].name);
            return -1;
        }
        known = perf_opt_launch(c, v, o, &bad) || perf_opt_bench(c, v, o, &bad);
        if (!known)
            known = perf_opt_nccl(c, &v, argc, argv, o, err, errlen, &bad);
        if (known < 0)
            return -1;
        if (!known) {
            snprintf(err, errlen, "unknown option %s (see --help)",
                     perf_optname(argv, v, name, sizeof(name)));
            return -1;
        }
        if (bad) {
            snprintf(err, errlen, "bad value for %s: %s%s",
                     perf_optname(argv, v, name, sizeof(name)), v ? v : "",
                     c == 'd' ? " (accepted: int8 char uint8 int32 uint32 int64 uint64 half "
                                "float double bfloat16 f8e4m3 f8e5m2, rmacoll's names such "
                                "as float16 bool int16 complex64, or all)"
                     : c == 'a' ? " (accepted: 0 rank 0's time, 1 the mean, 2 the minimum, "
                                  "3 the maximum, as nccl-tests)"
                                : "");
            return -1;
        }
    }
    if (perf_opts_conflicts(argc, argv, o, err, errlen) != 0)
        return -1;
    return perf_opts_settle(o, err, errlen);
}
