/*
 * perfrun.c - the AlltoAllV benchmark loop shared by rmacoll-perf and the
 * MPI baseline: options, size rows, count matrices, timing, checking,
 * gathering and printing (see perfrun.h).
 */
#include "perfrun.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    o->average = 3;
}

void rmacoll_perf_usage(const char *prog, FILE *out)
{
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
"  --scheduler NAME       shift | node_shift | xor | random\n"
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
"  -a, --average 0|1|2|3  time over ranks: rank 0, mean, min, max (default 3,\n"
"                         max; nccl-tests defaults to 1)\n"
"  -z, --blocking 0|1     wait for each call (device memory; host calls\n"
"                         always block)\n"
"  -C, --report_cputime 0|1  time on the host clock also with device memory\n"
"  -M, --memory_report 0|1   print the largest buffers of any rank\n"
"  -J, --output_file FILE, --json FILE   write the rows as JSON (FILE - =\n"
"                         stdout; the table then goes to stderr)\n"
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
"  --dist SPEC            uniform | random | zipf:ALPHA | sparse:P |\n"
"                         matrix:FILE (default zipf:1.2); see docs/perf.md\n"
"  --seed N               seed of the count generator (default 1)\n"
"  -q, --quiet            rows only, no header\n"
"  -h, --help             this text\n"
"SIZE: bytes with K/M/G suffixes (powers of 1024), fractions allowed (1.5M).\n"
"In-place columns print N/A: rmacoll has no in-place AlltoAllV yet.\n"
"Exit status: 0 ok, 1 a rank failed, 2 wrong data, 64 bad usage.\n",
            prog);
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
#define PERF_NTYPES ((int)(sizeof(perf_types) / sizeof(perf_types[0])))

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
    PO_SEED, PO_JSON, PO_NO_CHECK, PO_CHECK_ON, PO_CHECK_EVERY
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
    {"no-check", no_argument, NULL, PO_NO_CHECK},
    {"check-every", no_argument, NULL, PO_CHECK_EVERY},
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
static int perf_json_writable(const char *path, char *err, size_t errlen)
{
    char dir[RMACOLL_PERF_STR];
    const char *slash = strrchr(path, '/');

    struct stat sb;

    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "--json %s: is a directory, not a file", path);
        return -1;
    }
    if (access(path, F_OK) == 0) {
        if (access(path, W_OK) == 0)
            return 0;
        snprintf(err, errlen, "--json %s: cannot write the file: %s", path,
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
        snprintf(err, errlen, "--json %s: cannot create the file in %s: %s", path, dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}


int rmacoll_perf_opts_parse(int argc, char **argv, rmacoll_perf_opts_t *o,
                            FILE *out, char *err, size_t errlen)
{
    static const char shortopts[] = "+:hqt:g:b:e:i:f:n:m:w:p:c:o:d:r:z:G:C:a:R:M:N:T:J:";
    char name[64];
    int c;

    optind = 0;      /* glibc: full re-initialisation (tests parse twice) */
    opterr = 0;
    for (;;) {
        int li = -1, bad = 0, iv = 0;
        const char *v;

        optopt = 0;
        c = getopt_long_only(argc, argv, shortopts, perf_longopts, &li);
        if (c == -1)
            break;
        v = optarg;
        switch (c) {
        case 'h':
            rmacoll_perf_usage(argv[0], out);
            return 1;
        case '?':
            if (optopt > 0 && optopt < 256)
                snprintf(name, sizeof(name), "-%c", optopt);
            else
                perf_optname(argv, NULL, name, sizeof(name));
            snprintf(err, errlen, "unknown option %s (see --help)", name);
            return -1;
        case ':':
            if (optopt > 0 && optopt < 256)
                snprintf(name, sizeof(name), "-%c", optopt);
            else
                perf_optname(argv, NULL, name, sizeof(name));
            snprintf(err, errlen, "option %s needs a value", name);
            return -1;
        case PO_NP:
            bad = perf_int(v, 1, 1024, &o->np);
            o->topology_given = o->np_given = 1;
            break;
        case PO_PPN:
            bad = perf_int(v, 1, 1024, &o->ppn);
            o->topology_given = o->ppn_given = 1;
            break;
        case PO_TOPOLOGY:
            bad = perf_copy(o->topology, sizeof(o->topology), v);
            o->topology_given = 1;
            break;
        case PO_NODES: {
            int tmp[1024], n = 0;

            bad = rmacoll_perf_parse_nodes(v, tmp, 1024, &n) ||
                  perf_copy(o->nodes, sizeof(o->nodes), v);
            o->topology_given = 1;
            break;
        }
        case PO_TIMEOUT:
        case 'T':
            bad = perf_double(v, 0, &o->timeout_s);
            break;
        case PO_SPAWN: o->force_spawn = 1; break;
        case PO_DRY_RUN: o->dry_run = 1; break;
        case PO_CONFIG:
            bad = perf_copy(o->config_path, sizeof(o->config_path), v);
            break;
        case PO_RELAY: bad = perf_onoff(v, &o->relay); break;
        case PO_SCHEDULER:
            bad = perf_copy(o->scheduler, sizeof(o->scheduler), v);
            break;
        case PO_INTRA:
            bad = perf_copy(o->intra_node, sizeof(o->intra_node), v);
            break;
        case PO_INTER:
            bad = perf_copy(o->inter_node, sizeof(o->inter_node), v);
            break;
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
                bad = 1;
            break;
        case PO_BASELINE:
            bad = (strcmp(v, "none") != 0 && strcmp(v, "nccl") != 0) ||
                  perf_copy(o->baseline, sizeof(o->baseline), v);
            break;
        case PO_GEMM: bad = perf_int(v, 16, 65536, &o->gemm_n); break;
        case PO_GEMM_ITERS:
            bad = perf_int(v, 1, 1000000, &o->gemm_iters);
            break;
        case PO_DIST: bad = perf_copy(o->dist, sizeof(o->dist), v); break;
        case PO_SEED: {
            char *end = NULL;

            errno = 0;
            o->seed = strtoull(v, &end, 0);
            bad = errno != 0 || end == v || *end != '\0';
            break;
        }
        case PO_JSON:
        case 'J':
            bad = v[0] == '\0' || perf_copy(o->json_path, sizeof(o->json_path), v);
            o->json_stdout = !strcmp(v, "-");
            break;
        case PO_NO_CHECK: o->check = 0; o->check_every = 0; break; /* turns both off */
        case PO_CHECK_EVERY:
            o->check_every = 1;
            if (o->check == 0)
                o->check = 1;
            break;
        case 'q': o->quiet = 1; break;
        case 't':
        case 'g':
            bad = perf_int(v, 1, 1024, &iv);
            if (!bad && iv != 1) {
                snprintf(err, errlen, "%s %s: rmacoll-perf runs one rank per "
                         "process and one GPU per rank; start more ranks with "
                         "-np or the launcher",
                         c == 't' ? "-t" : "-g", v);
                return -1;
            }
            break;
        case 'G': bad = perf_int(v, 0, 1000000, &o->graph_launches); break;
        case 'b': bad = perf_size(v, &o->minbytes); break;
        case 'e': bad = perf_size(v, &o->maxbytes); break;
        case 'i':
            bad = perf_size(v, &o->stepbytes) || o->stepbytes == 0;
            break;
        case 'f':
            bad = perf_double(v, 0, &o->stepfactor) || !(o->stepfactor > 1.0);
            break;
        case 'n': bad = perf_int(v, 1, 1000000000, &o->iters); break;
        case 'm': bad = perf_int(v, 1, 1000000, &o->agg_iters); break;
        case 'w': bad = perf_int(v, 0, 1000000000, &o->warmup); break;
        case 'N': bad = perf_int(v, 0, 1000000000, &o->run_cycles); break;
        case PO_CHECK_ON:   /* --check alone = on; --check V / --check=V as -c V */
            if (v == NULL && optind < argc && argv[optind][0] >= '0' &&
                argv[optind][0] <= '9')
                v = argv[optind++]; /* nccl-tests' "--check 0" */
            /* fall through */
        case 'c':           /* -c N: N checked iterations (nccl-tests) */
            if (v == NULL)
                o->check = 1;
            else if (perf_onoff(v, &o->check) != 0)
                bad = perf_int(v, 0, 1000000, &o->check);
            if (!bad && o->check == 0)
                o->check_every = 0; /* -c 0 is --no-check: the last option wins */
            break;
        case 'd':
            if (!strcmp(v, "all")) {
                o->dtype_all = 1;
            } else {
                bad = perf_dtype(v, &o->dtype);
                o->dtype_all = 0;
            }
            o->dtype_given = 1;
            break;
        case 'a': bad = perf_int(v, 0, 3, &o->average); break;
        case 'z': bad = perf_onoff(v, &o->blocking); break;
        case 'C': bad = perf_onoff(v, &o->cputime); break;
        case 'M': bad = perf_onoff(v, &o->memory_report); break;
        case 'o':   /* reduction: none in an AlltoAllV */
        case 'r':   /* root: none */
        case 'p':   /* parallel init of threads: one thread per process */
            break;
        case 'R': bad = perf_int(v, 0, 2, &o->local_register); break;
        default:
            snprintf(err, errlen, "unknown option %s (see --help)",
                     perf_optname(argv, v, name, sizeof(name)));
            return -1;
        }
        if (bad) {
            snprintf(err, errlen, "bad value for %s: %s",
                     perf_optname(argv, v, name, sizeof(name)), v ? v : "");
            return -1;
        }
    }
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
        perf_json_writable(o->json_path, err, errlen) != 0)
        return -1;
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

/* ---- helpers ---- */

static double perf_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

int64_t rmacoll_perf_node_key(void)
{
    const char *id = getenv("RMACOLL_NODE_ID");
    char host[256] = "";
    uint32_t h = 2166136261u;

    if (id != NULL && *id != '\0') {
        char *end = NULL;
        long long v = strtoll(id, &end, 10);

        if (end != id && *end == '\0' && v >= 0 && v < (1ll << 40))
            return v;
        for (const char *p = id; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        return (int64_t)h;
    }
    gethostname(host, sizeof(host) - 1);
    for (const char *p = host; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return (int64_t)h;
}

static void perf_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* One row's result on rank 0. */
typedef struct perf_row {
    uint64_t size;       /* nominal bytes per rank */
    uint64_t count;      /* nominal elements per rank */
    rmacoll_datatype_t dtype;
    double time_us;      /* max over ranks of the mean */
    double time_min_us;  /* min over ranks of the mean */
    double max_bytes;    /* max over ranks of max(sent, received) */
    double buf_bytes;    /* max over ranks of send + receive buffer bytes */
    double algbw, busbw; /* GB/s */
    double wrong;        /* sum over ranks */
} perf_row_t;

/* Per-rank record gathered to rank 0. */
enum { PERF_G_TIME, PERF_G_SENT, PERF_G_RECV, PERF_G_WRONG, PERF_G_N };

typedef struct perf_state {
    const rmacoll_perf_opts_t *o;
    const rmacoll_perf_backend_t *be;
    int n, rank;
    int64_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    const rmacoll_perf_devops_t *dev; /* device hooks (--buffers cuda) or NULL */
    int ncoll;           /* 1, or 2 with a baseline */
    double *gathered;    /* rank 0: n * ncoll * PERF_G_N, rank-major */
    FILE *out;           /* rank 0's table: stdout, or stderr with --json - */
    char err[512];
} perf_state_t;

/* Buffers of one row: host (fill, check) and, with device memory, their
 * device twins that the collectives see. */
typedef struct perf_bufs {
    void *hs, *hr;        /* host send / receive */
    void *ds, *dr;        /* what the collective gets: device or hs/hr */
    size_t sbytes, rbytes, esize;
} perf_bufs_t;

/* Stamps the send buffer for `iter` and puts it where the call reads it. */
static rmacoll_status_t perf_put_send(perf_state_t *s, perf_bufs_t *b,
                                      uint64_t iter)
{
    const rmacoll_perf_devops_t *dev = s->dev;

    rmacoll_fill_send(b->hs, b->sbytes, b->esize, s->rank, s->n,
                      s->sendcounts, s->sdispls, iter);
    if (dev == NULL || b->sbytes == 0)
        return RMACOLL_SUCCESS;
    return dev->upload(s->be->ctx, b->ds, b->hs, b->sbytes, s->err,
                       sizeof(s->err));
}

/* Resets the receive buffer to the sentinel, where the call writes it. */
static rmacoll_status_t perf_reset_recv(perf_state_t *s, perf_bufs_t *b)
{
    const rmacoll_perf_devops_t *dev = s->dev;

    memset(b->hr, RMACOLL_FILL_SENTINEL, b->rbytes);
    if (dev == NULL || b->rbytes == 0)
        return RMACOLL_SUCCESS;
    return dev->upload(s->be->ctx, b->dr, b->hr, b->rbytes, s->err,
                       sizeof(s->err));
}

/* Device memory: events on the stream, or with -C 1 the host clock after
 * the stream has drained (nccl-tests' report_cputime). */
static rmacoll_status_t perf_timer_start(perf_state_t *s, double *t0)
{
    if (s->dev != NULL && !s->o->cputime)
        return s->dev->timer_start(s->be->ctx, s->err, sizeof(s->err));
    *t0 = perf_now_us();
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t perf_timer_stop(perf_state_t *s, double t0,
                                        double *us)
{
    if (s->dev != NULL && !s->o->cputime)
        return s->dev->timer_stop(s->be->ctx, us, s->err, sizeof(s->err));
    if (s->dev != NULL) {
        rmacoll_status_t st = s->dev->sync(s->be->ctx, s->err,
                                           sizeof(s->err));

        if (st != RMACOLL_SUCCESS)
            return st;
    }
    *us = perf_now_us() - t0;
    return RMACOLL_SUCCESS;
}

/* One call, then with -z 1 and device memory a wait for its completion
 * (nccl-tests' blocking mode; host-memory calls always block). */
static rmacoll_status_t perf_call(perf_state_t *s, perf_bufs_t *b,
                                  rmacoll_perf_a2av_fn_t fn,
                                  rmacoll_datatype_t dtype)
{
    rmacoll_status_t st;

    st = fn(s->be->ctx, b->ds, s->sendcounts, s->sdispls, b->dr,
            s->recvcounts, s->rdispls, dtype, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && s->o->blocking && s->dev != NULL)
        st = s->dev->sync(s->be->ctx, s->err, sizeof(s->err));
    return st;
}

/* The calls of one timed iteration: agg_iters calls, or with -G the
 * launches of the graph of them (captured by perf_measure). */
static rmacoll_status_t perf_iteration(perf_state_t *s, perf_bufs_t *b,
                                       rmacoll_perf_a2av_fn_t fn, rmacoll_datatype_t dtype,
                                       int times)
{
    rmacoll_status_t st = RMACOLL_SUCCESS;

    if (s->o->graph_launches > 0)
        return s->dev->graph_launch(s->be->ctx, s->o->graph_launches * times, s->err,
                                    sizeof(s->err));
    for (long a = 0; a < (long)s->o->agg_iters * times && st == RMACOLL_SUCCESS; a++)
        st = perf_call(s, b, fn, dtype);
    return st;
}

/* Byte offset of the first received element (the first receiver slot
 * with a nonzero count), 0 when nothing is received. */
static size_t perf_first_recv(const perf_state_t *s, const perf_bufs_t *b)
{
    for (int p = 0; p < s->n; p++)
        if (s->recvcounts[p] > 0)
            return (size_t)s->rdispls[p] * b->esize;
    return 0;
}

/* One checked iteration: a fresh stamp (row_id, it + 1) in the send
 * buffer, the receive buffer reset to the sentinel (both copied to the
 * device when there is one), a barrier, the call (timed into *us when
 * timed), the receive buffer downloaded and checked; the wrong elements
 * are added to *wrong and the first bad iteration reported once. */
static rmacoll_status_t perf_checked(perf_state_t *s, perf_bufs_t *b,
                                     rmacoll_perf_a2av_fn_t fn,
                                     rmacoll_datatype_t dtype, const char *label,
                                     uint64_t row_id, int it, int timed,
                                     double *us, uint64_t *wrong, int *reported)
{
    const rmacoll_perf_backend_t *be = s->be;
    uint64_t iter = (row_id << 32) | (uint64_t)(it + 1);
    rmacoll_check_report_t rep;
    rmacoll_status_t st;
    double t0 = 0;
    uint64_t bad;

    st = perf_put_send(s, b, iter);
    if (st == RMACOLL_SUCCESS)
        st = perf_reset_recv(s, b);
    if (st == RMACOLL_SUCCESS)
        st = be->barrier(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && timed)
        st = perf_timer_start(s, &t0);
    if (st == RMACOLL_SUCCESS)
        st = perf_iteration(s, b, fn, dtype, 1);
    if (st == RMACOLL_SUCCESS && timed)
        st = perf_timer_stop(s, t0, us);
    if (st == RMACOLL_SUCCESS && !timed && s->dev != NULL)
        st = s->dev->sync(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && s->dev != NULL && b->rbytes > 0)
        st = s->dev->download(be->ctx, b->hr, b->dr, b->rbytes,
                              s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        return st;
    /* Test hook: RMACOLL_PERF_TEST_CORRUPT=R flips the first received byte
     * on rank R, so a test can see the check fail. */
    if (b->rbytes > 0 && getenv("RMACOLL_PERF_TEST_CORRUPT") != NULL &&
        atoi(getenv("RMACOLL_PERF_TEST_CORRUPT")) == s->rank)
        ((unsigned char *)b->hr)[perf_first_recv(s, b)] ^= 0x5a;
    bad = rmacoll_check_recv(b->hr, b->rbytes, b->esize, s->rank, s->n,
                             s->recvcounts, s->rdispls, iter, &rep);
    if (bad != 0 && !*reported) {
        fprintf(stderr, "%s: rank %d: %s: %llu wrong in %s iteration %d: %s\n",
                be->name, s->rank, label, (unsigned long long)bad,
                timed ? "timed" : "checked", it, rep.msg);
        *reported = 1;
    }
    *wrong += bad;
    return RMACOLL_SUCCESS;
}

/* Runs one collective on the row's buffers: warm-ups, then the timed
 * iterations, checked or not; fills g[PERF_G_N]. With -G the agg_iters
 * calls of an iteration are captured into one CUDA graph after the
 * warm-ups (the buffers and counts stay those of the row), and each
 * iteration launches it graph_launches times. */
static rmacoll_status_t perf_measure(perf_state_t *s, perf_bufs_t *b,
                                     rmacoll_perf_a2av_fn_t fn,
                                     const char *label,
                                     rmacoll_datatype_t dtype,
                                     uint64_t row_id, double *g)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_opts_t *o = s->o;
    rmacoll_status_t st;
    double total_us = 0, t0 = 0, us = 0;
    uint64_t wrong = 0;
    int reported = 0;

    /* Warm-ups: one fill, no check (they also fault the pages in). */
    st = perf_put_send(s, b, row_id << 32);
    if (st == RMACOLL_SUCCESS)
        st = perf_reset_recv(s, b);
    for (int it = 0; it < o->warmup && st == RMACOLL_SUCCESS; it++)
        st = perf_call(s, b, fn, dtype);
    if (st == RMACOLL_SUCCESS && s->dev != NULL)
        st = s->dev->sync(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && o->graph_launches > 0) {
        rmacoll_status_t cst;

        st = s->dev->graph_begin(be->ctx, s->err, sizeof(s->err));
        if (st == RMACOLL_SUCCESS) {
            char keep[sizeof(s->err)];

            for (int a = 0; a < o->agg_iters && st == RMACOLL_SUCCESS; a++)
                st = perf_call(s, b, fn, dtype);
            /* the capture always ends; a failed call's message wins */
            memcpy(keep, s->err, sizeof(keep));
            cst = s->dev->graph_end(be->ctx, st == RMACOLL_SUCCESS, s->err, sizeof(s->err));
            if (st != RMACOLL_SUCCESS)
                memcpy(s->err, keep, sizeof(keep));
            else
                st = cst;
        }
    }
    if (st != RMACOLL_SUCCESS)
        return st;

    if (o->check_every) {
        /* --check-every: every iteration a fresh stamp, the receive buffer
         * reset to the sentinel (both copied to the device when there is
         * one), a barrier (so fill/check skew is not timed), the call
         * alone timed (device: events around it on the stream; -m:
         * agg_iters calls on the same buffers, which give the same bytes),
         * then the check. */
        for (int it = 0; it < o->iters; it++) {
            st = perf_checked(s, b, fn, dtype, label, row_id, it, 1, &us,
                              &wrong, &reported);
            if (st != RMACOLL_SUCCESS)
                return st;
            total_us += us;
        }
    } else {
        /* As nccl-tests: the timed iterations back to back on the warm-up's
         * data, then o->check checked iterations, each with a fresh stamp
         * (so bytes left by a timed call fail it), not timed. */
        st = be->barrier(be->ctx, s->err, sizeof(s->err));
        if (st == RMACOLL_SUCCESS)
            st = perf_timer_start(s, &t0);
        if (st == RMACOLL_SUCCESS)
            st = perf_iteration(s, b, fn, dtype, o->iters);
        if (st == RMACOLL_SUCCESS)
            st = perf_timer_stop(s, t0, &total_us);
        for (int c = 0; c < o->check && st == RMACOLL_SUCCESS; c++)
            st = perf_checked(s, b, fn, dtype, label, row_id, c, 0, &us,
                              &wrong, &reported);
        if (st != RMACOLL_SUCCESS)
            return st;
    }
    g[PERF_G_TIME] = total_us / ((double)o->iters * o->agg_iters *
                                 (o->graph_launches > 0 ? o->graph_launches : 1));
    g[PERF_G_SENT] = (double)b->sbytes;
    g[PERF_G_RECV] = (double)b->rbytes;
    g[PERF_G_WRONG] = (double)wrong;
    return RMACOLL_SUCCESS;
}

/* One host buffer of a row: at least 1 byte (a rank may send or receive
 * nothing), from the backend's host_alloc with -R, else page-aligned. */
static rmacoll_status_t perf_host_alloc(perf_state_t *s, size_t bytes,
                                        void **p)
{
    const rmacoll_perf_backend_t *be = s->be;

    *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (s->o->local_register)
        return be->host_alloc(be->ctx, bytes, p, s->err, sizeof(s->err));
    if (posix_memalign(p, 4096, bytes) != 0) {
        *p = NULL;
        snprintf(s->err, sizeof(s->err), "no memory for %zu bytes of buffers",
                 bytes);
        return RMACOLL_ERR_NO_MEMORY;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t perf_host_free(perf_state_t *s, void *p, char *err,
                                       size_t errlen)
{
    if (p == NULL)
        return RMACOLL_SUCCESS;
    if (s->o->local_register)
        return s->be->host_free(s->be->ctx, p, err, errlen);
    free(p);
    return RMACOLL_SUCCESS;
}

/* Releases the buffers of a row. Returns st when it is an error (s->err
 * kept), else the first error of freeing (s->err filled). */
static rmacoll_status_t perf_bufs_close(perf_state_t *s, perf_bufs_t *b,
                                        rmacoll_status_t st)
{
    char scratch[sizeof(s->err)];
    char *err = st == RMACOLL_SUCCESS ? s->err : scratch;
    rmacoll_status_t fs, fr;

    if (s->dev != NULL) {
        if (b->ds != NULL)
            s->dev->release(s->be->ctx, b->ds);
        if (b->dr != NULL)
            s->dev->release(s->be->ctx, b->dr);
    }
    fs = perf_host_free(s, b->hs, err, sizeof(s->err));
    fr = perf_host_free(s, b->hr, fs == RMACOLL_SUCCESS ? err : scratch,
                        sizeof(s->err));
    memset(b, 0, sizeof(*b));
    if (st != RMACOLL_SUCCESS)
        return st;
    return fs != RMACOLL_SUCCESS ? fs : fr;
}

/* Sets this rank's counts from case c and allocates the buffers of one
 * row (host, and device twins with device memory); on failure everything
 * is released. */
static rmacoll_status_t perf_bufs_open(perf_state_t *s,
                                       const rmacoll_case_t *c,
                                       rmacoll_datatype_t dtype,
                                       perf_bufs_t *bp)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_devops_t *dev = s->dev;
    int n = s->n, r = s->rank;
    int64_t sext, rext;
    perf_bufs_t b;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    memset(&b, 0, sizeof(b));
    memset(bp, 0, sizeof(*bp));
    b.esize = rmacoll_datatype_size(dtype);
    for (int j = 0; j < n; j++) {
        s->sendcounts[j] = c->send[(size_t)r * n + j];
        s->recvcounts[j] = c->recv[(size_t)j * n + r];
    }
    sext = rmacoll_displs_contiguous(n, s->sendcounts, s->sdispls);
    rext = rmacoll_displs_contiguous(n, s->recvcounts, s->rdispls);
    b.sbytes = (size_t)sext * b.esize;
    b.rbytes = (size_t)rext * b.esize;
    st = perf_host_alloc(s, b.sbytes, &b.hs);
    if (st == RMACOLL_SUCCESS)
        st = perf_host_alloc(s, b.rbytes, &b.hr);
    if (st != RMACOLL_SUCCESS) {
        perf_bufs_close(s, &b, st);
        return st;
    }
    b.ds = b.hs;
    b.dr = b.hr;
    if (dev != NULL) {
        b.ds = b.dr = NULL;
        st = dev->alloc(be->ctx, b.sbytes ? b.sbytes : 1, &b.ds, s->err,
                        sizeof(s->err));
        if (st == RMACOLL_SUCCESS)
            st = dev->alloc(be->ctx, b.rbytes ? b.rbytes : 1, &b.dr, s->err,
                            sizeof(s->err));
    }
    *bp = b;
    if (st == RMACOLL_SUCCESS && be->prepare != NULL)
        st = be->prepare(be->ctx, s->sendcounts, s->sdispls, s->recvcounts,
                         s->rdispls, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        perf_bufs_close(s, bp, st);
    return st;
}

/* Times one row on every collective (the primary, then the baseline, on
 * the same counts and buffers); fills mine[ncoll * PERF_G_N]. */
static rmacoll_status_t perf_row(perf_state_t *s, const rmacoll_case_t *c,
                                 rmacoll_datatype_t dtype, uint64_t row_id,
                                 double *mine)
{
    const rmacoll_perf_backend_t *be = s->be;
    perf_bufs_t b;
    rmacoll_status_t st;

    st = perf_bufs_open(s, c, dtype, &b);
    if (st != RMACOLL_SUCCESS)
        return st;
    st = perf_measure(s, &b, be->alltoallv,
                      be->coll_name ? be->coll_name : be->name, dtype, row_id,
                      mine);
    if (st == RMACOLL_SUCCESS && s->ncoll > 1)
        st = perf_measure(s, &b, be->baseline_alltoallv, be->baseline_name,
                          dtype, row_id, mine + PERF_G_N);
    return perf_bufs_close(s, &b, st);
}

/* Reduces collective k of the gathered records into row. */
static void perf_reduce(const perf_state_t *s, int k, perf_row_t *row)
{
    int n = s->n;

    double sum = 0;

    row->buf_bytes = 0;
    row->time_us = 0;
    row->time_min_us = -1;
    row->max_bytes = 0;
    row->wrong = 0;
    for (int i = 0; i < n; i++) {
        const double *g = s->gathered +
                          ((size_t)i * (size_t)s->ncoll + (size_t)k) * PERF_G_N;
        double b = g[PERF_G_SENT] > g[PERF_G_RECV] ? g[PERF_G_SENT]
                                                   : g[PERF_G_RECV];

        if (g[PERF_G_TIME] > row->time_us)
            row->time_us = g[PERF_G_TIME];
        if (row->time_min_us < 0 || g[PERF_G_TIME] < row->time_min_us)
            row->time_min_us = g[PERF_G_TIME];
        sum += g[PERF_G_TIME];
        if (b > row->max_bytes)
            row->max_bytes = b;
        if (g[PERF_G_SENT] + g[PERF_G_RECV] > row->buf_bytes)
            row->buf_bytes = g[PERF_G_SENT] + g[PERF_G_RECV];
        row->wrong += g[PERF_G_WRONG];
    }
    /* -a (nccl-tests' average): 0 rank 0, 1 mean, 2 min, 3 max (default). */
    switch (s->o->average) {
    case 0: row->time_us = s->gathered[(size_t)k * PERF_G_N + PERF_G_TIME]; break;
    case 1: row->time_us = sum / n; break;
    case 2: row->time_us = row->time_min_us; break;
    default: break;
    }
    /* bytes / us / 1e3 = GB/s with 1 GB = 1e9 bytes (as nccl-tests). */
    row->algbw = row->time_us > 0 ? row->max_bytes / row->time_us / 1e3 : 0;
    row->busbw = row->algbw * (double)(n - 1) / (double)n;
}

/* Node sizes in order of first appearance; *contig = 0 when a node's
 * ranks are not contiguous. */
static int perf_nodes(const double *keys, int n, int *sizes, int max,
                      int *contig)
{
    int nn = 0;
    double seen[RMACOLL_PERF_MAX_NODES];

    *contig = 1;
    for (int i = 0; i < n; i++) {
        int k;

        for (k = 0; k < nn; k++)
            if (seen[k] == keys[i])
                break;
        if (k == nn) {
            if (nn == max)
                return -1;
            seen[nn] = keys[i];
            sizes[nn++] = 0;
        }
        if (i > 0 && keys[i] != keys[i - 1] && sizes[k] > 0)
            *contig = 0;
        sizes[k]++;
    }
    return nn;
}

static const char *perf_dtype_name(rmacoll_datatype_t d)
{
    const char *s = rmacoll_datatype_name(d);

    return s != NULL ? s : "?";
}

/* A number in `width` columns with as many decimals as fit (nccl-tests'
 * layout: 2 decimals while they fit, then 1, then none, then %e). */
static void perf_num(double v, int width, char *buf, size_t len)
{
    int digits = 1;

    for (double p = 10; v >= p && digits < 30; p *= 10)
        digits++;
    if (digits < width - 2)
        snprintf(buf, len, "%*.2f", width, v);
    else if (digits < width - 1)
        snprintf(buf, len, "%*.1f", width, v);
    else if (digits <= width)
        snprintf(buf, len, "%*.0f", width, v);
    else
        snprintf(buf, len, "%*.1e", width, v);
}

static const char *perf_average_name(int average)
{
    static const char *const names[] = {"rank 0", "mean", "min", "max"};

    return average >= 0 && average < 4 ? names[average] : "max";
}

/* Where the host send and receive buffers come from (header, JSON). */
static const char *perf_host_alloc_name(const rmacoll_perf_opts_t *o,
                                        const rmacoll_perf_backend_t *be)
{
    if (!o->local_register)
        return "posix_memalign";
    return be->host_alloc_name != NULL ? be->host_alloc_name : "host_alloc";
}

/* Per-rank record of the "Using devices" lines: pid, device, then the
 * text "host\tbusid\tname" one byte per double (gather_f64 is all the
 * backends have). */
#define PERF_INFO_CHARS 192

static rmacoll_status_t perf_gather_info(perf_state_t *s, double *keys,
                                         char **lines)
{
    const rmacoll_perf_backend_t *be = s->be;
    double mine[3 + PERF_INFO_CHARS], *all = NULL;
    char host[64] = "", bus[32] = "host", name[96] = "host memory";
    char text[PERF_INFO_CHARS];
    int device = -1, k = 3 + PERF_INFO_CHARS;
    size_t cap;
    rmacoll_status_t st;

    *lines = NULL;
    gethostname(host, sizeof(host) - 1);
    if (be->describe != NULL)
        be->describe(be->ctx, &device, bus, sizeof(bus), name, sizeof(name));
    snprintf(text, sizeof(text), "%s\t%s\t%s", host, bus, name);
    memset(mine, 0, sizeof(mine));
    mine[0] = (double)rmacoll_perf_node_key();
    mine[1] = (double)getpid();
    mine[2] = (double)device;
    for (int i = 0; i < PERF_INFO_CHARS && text[i] != '\0'; i++)
        mine[3 + i] = (double)(unsigned char)text[i];
    if (s->rank == 0) {
        all = calloc((size_t)s->n * (size_t)k, sizeof(double));
        if (all == NULL) {
            snprintf(s->err, sizeof(s->err), "no memory for %d rank records",
                     s->n);
            /* still take part, so that the others are not left waiting */
        }
    }
    st = be->gather_f64(be->ctx, mine, k, all, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS || s->rank != 0) {
        free(all);
        return st;
    }
    if (all == NULL)
        return RMACOLL_ERR_NO_MEMORY;
    cap = (size_t)s->n * (PERF_INFO_CHARS + 64) + 1;
    *lines = calloc(1, cap);
    for (int r = 0; r < s->n; r++) {
        const double *g = all + (size_t)r * (size_t)k;
        char t[PERF_INFO_CHARS + 1], *h = t, *b, *nm;
        size_t used = *lines ? strlen(*lines) : 0;

        keys[r] = g[0];
        for (int i = 0; i < PERF_INFO_CHARS; i++)
            t[i] = (char)(int)g[3 + i];
        t[PERF_INFO_CHARS] = '\0';
        b = strchr(h, '\t');
        if (b != NULL)
            *b++ = '\0';
        nm = b != NULL ? strchr(b, '\t') : NULL;
        if (nm != NULL)
            *nm++ = '\0';
        if (*lines != NULL)
            snprintf(*lines + used, cap - used,
                     "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n",
                     r, (int)g[1], h, (int)g[2], b ? b : "?", nm ? nm : "?");
    }
    free(all);
    return *lines != NULL ? RMACOLL_SUCCESS : RMACOLL_ERR_NO_MEMORY;
}

/* ---- --gemm: SM interference ---- */

/* Per-rank record of one collective in --gemm mode. */
enum {
    PERF_L_ALONE,   /* us: the GEMM batch alone */
    PERF_L_ONE,     /* us: one call alone (mean over -n back-to-back calls) */
    PERF_L_GEMM,    /* us: the GEMM batch with the collective looping */
    PERF_L_COMM,    /* us: the whole loop of calls */
    PERF_L_CALLS,   /* calls in the loop */
    PERF_L_SENT,
    PERF_L_RECV,
    PERF_L_N
};

#define PERF_GEMM_COVER 1.5       /* loop planned for 1.5 x the GEMM batch */
#define PERF_GEMM_MAX_CALLS 100000

/* One collective against the load: warm-ups and the one-call time, the
 * GEMM batch alone (right before, so that both see the same clocks), the
 * loop length agreed by every rank, then the GEMM batch and the loop
 * started together after a barrier; fills g[PERF_L_N]. */
static rmacoll_status_t perf_gemm_coll(perf_state_t *s, perf_bufs_t *b,
                                       rmacoll_perf_a2av_fn_t fn,
                                       const char *label,
                                       rmacoll_datatype_t dtype, double *g)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_loadops_t *ld = be->load;
    double one[PERF_G_N] = {0}, mine[2], *all = NULL;
    double batch = 0, call = -1, comm_us = 0, gemm_us = 0, alone_us = 0;
    rmacoll_status_t st;
    long calls;

    /* Warm-ups, then -n calls back to back: one call's time. */
    st = perf_measure(s, b, fn, label, dtype, 0, one);
    if (st == RMACOLL_SUCCESS)
        st = be->barrier(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->start(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->finish(be->ctx, &alone_us, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        return st;
    /* Same loop length on every rank: the longest batch over the shortest
     * call, so that the loop outlasts the GEMMs everywhere. */
    all = calloc((size_t)s->n * 2, sizeof(double));
    if (all == NULL) {
        snprintf(s->err, sizeof(s->err), "rank %d: out of memory", s->rank);
        return RMACOLL_ERR_NO_MEMORY;
    }
    mine[0] = alone_us;
    mine[1] = one[PERF_G_TIME];
    st = be->allgather_f64(be->ctx, mine, 2, all, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS) {
        free(all);
        return st;
    }
    for (int i = 0; i < s->n; i++) {
        if (all[2 * i] > batch)
            batch = all[2 * i];
        if (call < 0 || all[2 * i + 1] < call)
            call = all[2 * i + 1];
    }
    free(all);
    calls = call > 0 ? (long)ceil(PERF_GEMM_COVER * batch / call) + 1 : 1;
    if (calls > PERF_GEMM_MAX_CALLS)
        calls = PERF_GEMM_MAX_CALLS;

    /* Both streams after one barrier: the GEMMs first (cheap to enqueue),
     * then the calls; each stream timed by its own events. */
    st = be->barrier(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->start(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = s->dev->timer_start(be->ctx, s->err, sizeof(s->err));
    for (long it = 0; it < calls && st == RMACOLL_SUCCESS; it++)
        st = fn(be->ctx, b->ds, s->sendcounts, s->sdispls, b->dr,
                s->recvcounts, s->rdispls, dtype, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = s->dev->timer_stop(be->ctx, &comm_us, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->finish(be->ctx, &gemm_us, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        return st;
    g[PERF_L_ALONE] = alone_us;
    g[PERF_L_ONE] = one[PERF_G_TIME];
    g[PERF_L_GEMM] = gemm_us;
    g[PERF_L_COMM] = comm_us;
    g[PERF_L_CALLS] = (double)calls;
    g[PERF_L_SENT] = (double)b->sbytes;
    g[PERF_L_RECV] = (double)b->rbytes;
    return RMACOLL_SUCCESS;
}

/* Rank 0's summary of one collective. */
typedef struct perf_gemm_res {
    double alone_us, gemm_us;   /* max over ranks */
    double slowdown_pct;        /* gemm_us / alone_us - 1, in % */
    double worst_rank_pct;      /* max over ranks of the rank's own slowdown */
    double call_us, one_us;     /* max over ranks: per call in the loop, alone */
    double max_bytes;
    double busbw, busbw_alone;  /* GB/s */
    double coverage;            /* min over ranks: loop time / GEMM time */
    double calls;
} perf_gemm_res_t;

static void perf_gemm_reduce(const perf_state_t *s, const double *gathered,
                             int k, perf_gemm_res_t *r)
{
    int n = s->n;

    memset(r, 0, sizeof(*r));
    r->coverage = -1;
    r->worst_rank_pct = -1e300;
    for (int i = 0; i < n; i++) {
        const double *g = gathered +
                          ((size_t)i * (size_t)s->ncoll + (size_t)k) * PERF_L_N;
        double bytes = g[PERF_L_SENT] > g[PERF_L_RECV] ? g[PERF_L_SENT]
                                                       : g[PERF_L_RECV];
        double per_call = g[PERF_L_CALLS] > 0 ? g[PERF_L_COMM] / g[PERF_L_CALLS]
                                              : 0;
        double cover = g[PERF_L_GEMM] > 0 ? g[PERF_L_COMM] / g[PERF_L_GEMM] : 0;
        double pct = g[PERF_L_ALONE] > 0
                         ? (g[PERF_L_GEMM] / g[PERF_L_ALONE] - 1) * 100 : 0;

        if (g[PERF_L_ALONE] > r->alone_us)
            r->alone_us = g[PERF_L_ALONE];
        if (g[PERF_L_GEMM] > r->gemm_us)
            r->gemm_us = g[PERF_L_GEMM];
        if (per_call > r->call_us)
            r->call_us = per_call;
        if (g[PERF_L_ONE] > r->one_us)
            r->one_us = g[PERF_L_ONE];
        if (bytes > r->max_bytes)
            r->max_bytes = bytes;
        if (r->coverage < 0 || cover < r->coverage)
            r->coverage = cover;
        if (pct > r->worst_rank_pct)
            r->worst_rank_pct = pct;
        r->calls = g[PERF_L_CALLS];
    }
    r->slowdown_pct = r->alone_us > 0 ? (r->gemm_us / r->alone_us - 1) * 100
                                      : 0;
    r->busbw = r->call_us > 0 ? r->max_bytes / r->call_us / 1e3 *
                                    (double)(n - 1) / (double)n : 0;
    r->busbw_alone = r->one_us > 0 ? r->max_bytes / r->one_us / 1e3 *
                                         (double)(n - 1) / (double)n : 0;
}

/* --gemm: the GEMM batch alone, then against each collective on the -b
 * size of case c; prints on rank 0 and writes json (rank 0, may be NULL).
 * Returns 0 or 1 (error). */
static int perf_gemm_run(perf_state_t *s, const rmacoll_case_t *c,
                         rmacoll_datatype_t dtype, uint64_t size,
                         FILE *json)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_opts_t *o = s->o;
    double mine[2 * PERF_L_N] = {0};
    double *gathered = NULL;
    double gemm_flops = 2.0 * (double)o->gemm_n * (double)o->gemm_n *
                        (double)o->gemm_n;
    perf_gemm_res_t res[2];
    perf_bufs_t b;
    rmacoll_status_t st;
    const char *names[2];

    names[0] = be->coll_name ? be->coll_name : be->name;
    names[1] = s->ncoll > 1 ? be->baseline_name : "";
    gathered = calloc((size_t)s->n * (size_t)s->ncoll * PERF_L_N,
                      sizeof(double));
    if (gathered == NULL) {
        fprintf(stderr, "%s: rank %d: out of memory\n", be->name, s->rank);
        return 1;
    }
    st = perf_bufs_open(s, c, dtype, &b);
    if (st == RMACOLL_SUCCESS) {
        /* Payload once (contents do not matter: nothing is checked). */
        st = perf_put_send(s, &b, 0);
        if (st == RMACOLL_SUCCESS)
            st = perf_reset_recv(s, &b);
        if (st == RMACOLL_SUCCESS)
            st = perf_gemm_coll(s, &b, be->alltoallv, names[0], dtype, mine);
        if (st == RMACOLL_SUCCESS && s->ncoll > 1)
            st = perf_gemm_coll(s, &b, be->baseline_alltoallv, names[1],
                                dtype, mine + PERF_L_N);
        st = perf_bufs_close(s, &b, st);
    }
    if (st == RMACOLL_SUCCESS)
        st = be->gather_f64(be->ctx, mine, s->ncoll * PERF_L_N, gathered,
                            s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "%s: rank %d: --gemm %d at %llu bytes failed: %s "
                "(%s)\n", be->name, s->rank, o->gemm_n,
                (unsigned long long)size, s->err, rmacoll_status_name(st));
        free(gathered);
        return 1;
    }
    if (s->rank != 0) {
        free(gathered);
        return 0;
    }
    for (int k = 0; k < s->ncoll; k++)
        perf_gemm_reduce(s, gathered, k, &res[k]);
    free(gathered);

    {
        double per_ms = res[0].alone_us / o->gemm_iters / 1e3;
        double tflops = per_ms > 0 ? gemm_flops / (per_ms * 1e-3) / 1e12 : 0;

        fprintf(s->out, "gemm alone: %.3f ms (%.1f TFLOP/s)", per_ms, tflops);
        for (int k = 0; k < s->ncoll; k++)
            fprintf(s->out, "; with %s: %.3f ms (%+.2f%%), %s busbw %.1f GB/s",
                   names[k], res[k].gemm_us / o->gemm_iters / 1e3,
                   res[k].slowdown_pct, names[k], res[k].busbw);
        fprintf(s->out, "\n");
        if (!o->quiet) {
            fprintf(s->out, "#\n# %8s %12s %10s %10s %10s %10s %8s %10s %10s %8s\n",
                   "coll", "size", "gemm", "gemm", "slowdown", "worst",
                   "calls", "busbw", "busbw", "cover");
            fprintf(s->out, "# %8s %12s %10s %10s %10s %10s %8s %10s %10s %8s\n", "",
                   "(B)", "alone(ms)", "with(ms)", "(%)", "rank (%)", "",
                   "(overlap)", "(alone)", "");
            for (int k = 0; k < s->ncoll; k++)
                fprintf(s->out, "  %8s %12.0f %10.3f %10.3f %+10.2f %+10.2f %8.0f "
                       "%10.2f %10.2f %8.2f\n",
                       names[k], res[k].max_bytes,
                       res[k].alone_us / o->gemm_iters / 1e3,
                       res[k].gemm_us / o->gemm_iters / 1e3,
                       res[k].slowdown_pct, res[k].worst_rank_pct,
                       res[k].calls, res[k].busbw, res[k].busbw_alone,
                       res[k].coverage);
            fprintf(s->out, "#\n");
        }
        for (int k = 0; k < s->ncoll; k++)
            if (res[k].coverage < 1.0)
                fprintf(stderr, "%s: warning: the %s loop ended before the "
                        "GEMMs on some rank (it covered %.0f%% of the "
                        "batch): the slowdown is understated\n", be->name,
                        names[k], res[k].coverage * 100);
        fflush(s->out);

        if (json != NULL) {
            fprintf(json, "{\n  \"tool\": ");
            perf_json_str(json, be->name);
            fprintf(json, ",\n  \"mode\": \"gemm\",\n  \"launch\": ");
            perf_json_str(json, be->launch ? be->launch : "");
            fprintf(json, ",\n  \"nranks\": %d,\n  \"dist\": ", s->n);
            perf_json_str(json, o->dist);
            fprintf(json, ",\n  \"seed\": %llu,\n  \"dtype\": ",
                    (unsigned long long)o->seed);
            perf_json_str(json, perf_dtype_name(dtype));
            fprintf(json, ",\n  \"size\": %llu,\n  \"iters\": %d,"
                    "\n  \"warmup\": %d,\n  \"memory\": \"cuda\","
                    "\n  \"local_register\": 0,\n  \"baseline\": ",
                    (unsigned long long)size, o->iters, o->warmup);
            perf_json_str(json, s->ncoll > 1 ? be->baseline_name : "none");
            fprintf(json, ",\n  \"status\": \"ok\",\n  \"config\": {%s},",
                    be->json_config ? be->json_config : "");
            fprintf(json, "\n  \"gemm\": {\"n\": %d, \"dtype\": \"bfloat16\", "
                    "\"compute\": \"float32\", \"iters\": %d, "
                    "\"alone_ms\": %.6f, \"alone_tflops\": %.3f},"
                    "\n  \"results\": [",
                    o->gemm_n, o->gemm_iters, per_ms, tflops);
            for (int k = 0; k < s->ncoll; k++)
                fprintf(json,
                        "%s\n    {\"coll\": \"%s\", \"gemm_alone_ms\": %.6f, "
                        "\"gemm_ms\": %.6f, "
                        "\"slowdown_pct\": %.4f, \"worst_rank_slowdown_pct\": "
                        "%.4f, \"calls\": %.0f, \"max_rank_bytes\": %.0f, "
                        "\"call_us\": %.3f, \"busbw_gbs\": %.6f, "
                        "\"alone_call_us\": %.3f, \"alone_busbw_gbs\": %.6f, "
                        "\"coverage\": %.4f}",
                        k ? "," : "", names[k],
                        res[k].alone_us / o->gemm_iters / 1e3,
                        res[k].gemm_us / o->gemm_iters / 1e3,
                        res[k].slowdown_pct, res[k].worst_rank_pct,
                        res[k].calls, res[k].max_bytes, res[k].call_us,
                        res[k].busbw, res[k].one_us, res[k].busbw_alone,
                        res[k].coverage);
            fprintf(json, "\n  ]\n}\n");
        }
    }
    return 0;
}

int rmacoll_perf_run(const rmacoll_perf_opts_t *o,
                     const rmacoll_perf_backend_t *be)
{
    perf_state_t s;
    rmacoll_case_t *matrix = NULL;
    rmacoll_case_dist_t dist = {RMACOLL_CASE_UNIFORM, 0};
    rmacoll_datatype_t dtype = o->dtype;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    perf_row_t *rows = NULL;   /* rank 0: ncoll per size */
    int nrows = 0, cap = 0, rc = 0, is_matrix;
    int node_sizes[RMACOLL_PERF_MAX_NODES], nnodes = 0, contig = 1;
    double *keys = NULL;
    double bw_sum = 0, bw_base_sum = 0, ratio_sum = 0, wrong_total = 0;
    double max_buf = 0;
    int nratio = 0, nbw = 0, ntypes = 0;
    uint64_t row_id = 0;
    rmacoll_datatype_t types[PERF_NTYPES];
    char *devlines = NULL;
    FILE *json = NULL;
    int json_failed = 0;   /* rank 0 could not open --json FILE */

    memset(&s, 0, sizeof(s));
    s.o = o;
    s.be = be;
    s.n = be->nranks;
    s.rank = be->rank;
    s.ncoll = 1;
    s.out = stdout;
    is_matrix = strncmp(o->dist, "matrix:", 7) == 0;

    /* Memory and baseline: what the backend can do (same on every rank). */
    if (o->memory == RMACOLL_PERF_MEM_CUDA) {
        if (be->dev == NULL) {
            if (s.rank == 0)
                fprintf(stderr, "%s: --buffers cuda is not supported by this "
                        "tool or build\n", be->name);
            return 1;
        }
        s.dev = be->dev;
    }
    if (o->local_register && (s.dev != NULL || be->host_alloc == NULL ||
                              be->host_free == NULL)) {
        if (s.rank == 0)
            fprintf(stderr, "%s: -R %d: %s\n", be->name, o->local_register,
                    s.dev != NULL ? "registered buffers are host memory; "
                                    "--buffers cuda allocates its own device "
                                    "buffers: use -R 0 with it"
                                  : "this tool has no allocator of "
                                    "registered host memory");
        return RMACOLL_PERF_EXIT_USAGE;
    }
    if (o->baseline[0] != '\0' && strcmp(o->baseline, "none") != 0) {
        if (be->baseline_alltoallv == NULL || be->baseline_name == NULL ||
            strcmp(be->baseline_name, o->baseline) != 0) {
            if (s.rank == 0)
                fprintf(stderr, "%s: --baseline %s is not available here\n",
                        be->name, o->baseline);
            return 1;
        }
        s.ncoll = 2;
    }
    if (o->graph_launches > 0 && (s.dev == NULL || s.dev->graph_begin == NULL ||
                                  s.dev->graph_end == NULL || s.dev->graph_launch == NULL)) {
        if (s.rank == 0)
            fprintf(stderr, "%s: -G is not supported by this tool or build (needs "
                    "--buffers cuda and the CUDA runtime)\n", be->name);
        return 1;
    }
    if (o->gemm_n > 0 && (s.dev == NULL || be->load == NULL ||
                          be->allgather_f64 == NULL)) {
        if (s.rank == 0)
            fprintf(stderr, "%s: --gemm is not supported by this tool or "
                    "build (needs --buffers cuda and cuBLAS)\n", be->name);
        return 1;
    }

    if (is_matrix) {
        st = rmacoll_case_load(o->dist + 7, &matrix, s.err, sizeof(s.err));
        if (st == RMACOLL_SUCCESS && matrix->nranks != s.n) {
            snprintf(s.err, sizeof(s.err),
                     "%s has %d ranks, but %d are running", o->dist + 7,
                     matrix->nranks, s.n);
            st = RMACOLL_ERR_INVALID_ARG;
        }
        if (st == RMACOLL_SUCCESS && !o->dtype_given)
            dtype = matrix->dtype;
    } else {
        st = rmacoll_case_dist_parse(o->dist, &dist);
        if (st != RMACOLL_SUCCESS)
            snprintf(s.err, sizeof(s.err), "bad --dist %.400s", o->dist);
    }
    if (st != RMACOLL_SUCCESS) {
        /* Same inputs on every rank, so every rank stops here. */
        if (s.rank == 0)
            fprintf(stderr, "%s: %s\n", be->name, s.err);
        rmacoll_case_free(matrix);
        return 1;
    }

    s.sendcounts = calloc((size_t)s.n * 4, sizeof(int64_t));
    s.gathered = calloc((size_t)s.n * (size_t)s.ncoll * PERF_G_N,
                        sizeof(double));
    keys = calloc((size_t)s.n, sizeof(double));
    if (s.sendcounts == NULL || s.gathered == NULL || keys == NULL) {
        fprintf(stderr, "%s: rank %d: out of memory\n", be->name, s.rank);
        rc = 1;
        goto out;
    }
    s.sdispls = s.sendcounts + s.n;
    s.recvcounts = s.sendcounts + 2 * s.n;
    s.rdispls = s.sendcounts + 3 * s.n;

    /* Where every rank runs: node key, pid, host and device, for the node
     * summary and the "# Using devices" lines. */
    st = perf_gather_info(&s, keys, &devlines);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "%s: rank %d: gather failed: %s (%s)\n", be->name,
                s.rank, s.err, rmacoll_status_name(st));
        rc = 1;
        goto out;
    }
    if (s.rank == 0) {
        nnodes = perf_nodes(keys, s.n, node_sizes, RMACOLL_PERF_MAX_NODES,
                            &contig);
        if (o->json_stdout) {
            json = stdout;
            s.out = stderr;     /* stdout is the JSON document alone */
        } else if (o->json_path[0] != '\0') {
            json = fopen(o->json_path, "w");
            if (json == NULL) {
                fprintf(stderr, "%s: --json %s: cannot write the file: %s\n",
                        be->name, o->json_path, strerror(errno));
                json_failed = 1;   /* the run goes on (every rank is in it) */
            }
        }
    }

    if (s.rank == 0 && !o->quiet) {
        FILE *f = s.out;

        /* nccl-tests' first lines */
        fprintf(f, "# nThread 1 nGpus 1 minBytes %llu maxBytes %llu step: ",
                (unsigned long long)o->minbytes,
                (unsigned long long)o->maxbytes);
        if (o->stepbytes > 0)
            fprintf(f, "%llu(bytes)", (unsigned long long)o->stepbytes);
        else
            fprintf(f, "%g(factor)", o->stepfactor);
        fprintf(f, " warmup iters: %d iters: %d agg iters: %d validation: %d "
                "graph: %d\n#\n# Using devices\n%s#\n", o->warmup, o->iters,
                o->agg_iters, o->check, o->graph_launches, devlines ? devlines : "");
        fprintf(f, "# %s: nranks %d, nodes %d (", be->name, s.n, nnodes);
        for (int k = 0; k < nnodes; k++)
            fprintf(f, "%s%d", k ? "," : "", node_sizes[k]);
        fprintf(f, ")%s, launch %s\n", contig ? "" : " non-contiguous",
                be->launch ? be->launch : "?");
        char chk[48];

        if (o->check_every)
            snprintf(chk, sizeof(chk), "every timed iteration");
        else if (o->check)
            snprintf(chk, sizeof(chk), "%d untimed iteration%s after", o->check,
                     o->check > 1 ? "s" : "");
        else
            snprintf(chk, sizeof(chk), "off");
        fprintf(f, "# dist %s, seed %llu, dtype %s, iters %d, warmup %d, "
                "check %s, time %s over ranks\n",
                o->dist, (unsigned long long)o->seed,
                o->dtype_all ? "all" : perf_dtype_name(dtype), o->iters,
                o->warmup, chk, perf_average_name(o->average));
        if (be->header != NULL)
            fputs(be->header, f);
        /* The allocator named is that of host buffers (device buffers
         * are the device hooks'). */
        fprintf(f, "# memory %s, local_register %d%s%s%s, timing %s%s%s\n",
                s.dev ? "cuda" : "host", o->local_register,
                s.dev ? "" : " (", s.dev ? "" : perf_host_alloc_name(o, be),
                s.dev ? "" : ")",
                s.dev && !o->cputime ? "cuda events on the stream"
                                     : "host clock",
                s.ncoll > 1 ? ", baseline " : "",
                s.ncoll > 1 ? be->baseline_name : "");
        if (o->gemm_n > 0)
            fprintf(f, "# gemm interference: %d x bf16 %dx%dx%d GEMM (fp32 "
                    "compute) on a second stream, alltoallv of -b %llu B "
                    "looped on its own stream\n", o->gemm_iters, o->gemm_n,
                    o->gemm_n, o->gemm_n, (unsigned long long)o->minbytes);
        fprintf(f, "#\n");
        if (o->gemm_n > 0) {
            /* printed by perf_gemm_run */
        } else if (s.ncoll > 1) {
            /* Two rows per size; ratio = busbw of the first / the second. */
            fprintf(f, "# %10s %12s %8s %8s %10s %8s %8s %8s %7s\n", "size",
                    "count", "type", "coll", "time", "algbw", "busbw",
                    "#wrong", "ratio");
            fprintf(f, "# %10s %12s %8s %8s %10s %8s %8s %8s %7s\n", "(B)",
                    "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                    "");
        } else {
            /* nccl-tests' columns; in-place is not supported (N/A). */
            fprintf(f, "# %10s  %12s  %8s  %6s  %6s           out-of-place  "
                    "                     in-place          \n",
                    "", "", "", "", "");
            fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  "
                    "%6s  %6s %6s\n", "size", "count", "type", "redop",
                    "root", "time", "algbw", "busbw", "#wrong", "time",
                    "algbw", "busbw", "#wrong");
            fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  "
                    "%6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
                    "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                    "(GB/s)", "");
        }
        fflush(f);
    }

    if (o->gemm_n > 0) {
        /* One size, the -b one (or the matrix), against the GEMMs. */
        rmacoll_case_t *c = matrix;
        uint64_t size = o->minbytes;

        if (!is_matrix) {
            int one_node = s.n;
            int64_t count = (int64_t)(size / rmacoll_datatype_size(dtype));

            st = rmacoll_case_random(1, &one_node, &dist, count / s.n,
                                     o->seed * 1000003u + size, dtype, &c);
            if (st != RMACOLL_SUCCESS) {
                fprintf(stderr, "%s: rank %d: generator failed for %llu "
                        "bytes: %s\n", be->name, s.rank,
                        (unsigned long long)size, rmacoll_status_name(st));
                rc = 1;
                goto out;
            }
        }
        rc = perf_gemm_run(&s, c, dtype, size, json);
        if (!is_matrix)
            rmacoll_case_free(c);
        goto out;
    }

    /* -d all: every type in nccl-tests' order; -N: sweeps (0 = forever). */
    if (o->dtype_all) {
        for (int i = 0; i < PERF_NTYPES; i++)
            types[ntypes++] = perf_types[i].dt;
    } else {
        types[ntypes++] = dtype;
    }
    for (int cycle = 0; rc == 0 && (o->run_cycles == 0 || cycle < o->run_cycles);
         cycle++) {
    for (int ti = 0; rc == 0 && ti < ntypes; ti++) {
    dtype = types[ti];
    for (uint64_t size = o->minbytes;; row_id++) {
        size_t esize = rmacoll_datatype_size(dtype);
        rmacoll_case_t *c = matrix;
        double mine[2 * PERF_G_N] = {0};
        perf_row_t row[2];
        int64_t maxsent = 0;

        if (!is_matrix) {
            int one_node = s.n;
            int64_t count = (int64_t)(size / esize);

            /* One node for the generator, whatever the topology, so that
             * every tool and every topology gets the same counts. */
            st = rmacoll_case_random(1, &one_node, &dist, count / s.n,
                                     o->seed * 1000003u + size, dtype, &c);
            if (st != RMACOLL_SUCCESS) {
                fprintf(stderr, "%s: rank %d: generator failed for %llu "
                        "bytes: %s\n", be->name, s.rank,
                        (unsigned long long)size, rmacoll_status_name(st));
                rc = 1;
                break;
            }
        }
        st = perf_row(&s, c, dtype, row_id, mine);
        if (is_matrix) {
            for (int i = 0; i < s.n; i++) {
                int64_t t = 0;

                for (int j = 0; j < s.n; j++)
                    t += c->send[(size_t)i * s.n + j];
                if (t > maxsent)
                    maxsent = t;
            }
        }
        if (!is_matrix)
            rmacoll_case_free(c);
        if (st == RMACOLL_SUCCESS)
            st = be->gather_f64(be->ctx, mine, s.ncoll * PERF_G_N,
                                s.gathered, s.err, sizeof(s.err));
        if (st != RMACOLL_SUCCESS) {
            if (is_matrix)
                fprintf(stderr, "%s: rank %d: failed on %s: %s (%s)\n",
                        be->name, s.rank, o->dist, s.err,
                        rmacoll_status_name(st));
            else
                fprintf(stderr, "%s: rank %d: failed at %llu bytes: %s (%s)\n",
                        be->name, s.rank, (unsigned long long)size, s.err,
                        rmacoll_status_name(st));
            rc = 1;
            break;
        }
        if (s.rank == 0) {
            for (int k = 0; k < s.ncoll; k++) {
                row[k].size = is_matrix ? (uint64_t)maxsent * esize : size;
                row[k].count = row[k].size / esize;
                row[k].dtype = dtype;
                perf_reduce(&s, k, &row[k]);
                wrong_total += row[k].wrong;
                if (row[k].buf_bytes > max_buf)
                    max_buf = row[k].buf_bytes;
            }
            if (s.ncoll == 1) {
                char t[16], a[16], b[16];

                perf_num(row[0].time_us, 7, t, sizeof(t));
                perf_num(row[0].algbw, 6, a, sizeof(a));
                perf_num(row[0].busbw, 6, b, sizeof(b));
                fprintf(s.out, "%12llu  %12llu  %8s  %6s  %6d",
                        (unsigned long long)row[0].size,
                        (unsigned long long)row[0].count,
                        rmacoll_perf_type_name(dtype), "none", -1);
                if (o->check)
                    fprintf(s.out, "  %7s  %6s  %6s  %6g", t, a, b,
                            row[0].wrong);
                else
                    fprintf(s.out, "  %7s  %6s  %6s    N/A", t, a, b);
                fprintf(s.out, "  %7s  %6s  %6s  %5s\n", "N/A", "N/A", "N/A",
                        "N/A");
            } else {
                double ratio = row[1].busbw > 0 ? row[0].busbw / row[1].busbw
                                                : 0;

                for (int k = 0; k < 2; k++) {
                    fprintf(s.out,
                            "  %10llu %12llu %8s %8s %10.2f %8.3f %8.3f %8.0f",
                            (unsigned long long)row[k].size,
                            (unsigned long long)row[k].count,
                            rmacoll_perf_type_name(dtype),
                            k == 0 ? (be->coll_name ? be->coll_name : be->name)
                                   : be->baseline_name,
                            row[k].time_us, row[k].algbw, row[k].busbw,
                            row[k].wrong);
                    if (k == 0)
                        fprintf(s.out, " %7.3f\n", ratio);
                    else
                        fprintf(s.out, " %7s\n", "-");
                }
                if (row[1].busbw > 0) {
                    ratio_sum += ratio;
                    nratio++;
                }
                bw_base_sum += row[1].busbw;
            }
            fflush(s.out);
            if (nrows == cap) {
                int ncap = cap ? cap * 2 : 16;
                perf_row_t *nr = realloc(rows, (size_t)ncap * 2 *
                                                   sizeof(*rows));

                if (nr != NULL) {
                    rows = nr;
                    cap = ncap;
                }
            }
            if (nrows < cap) {
                rows[2 * nrows] = row[0];
                rows[2 * nrows + 1] = row[s.ncoll > 1 ? 1 : 0];
                nrows++;
            }
            bw_sum += row[0].busbw;
            nbw++;
        }
        if (is_matrix) {
            row_id++;
            break;
        }
        /* Next size: -i adds, -f multiplies; stop past -e. */
        if (o->stepbytes > 0) {
            if (size > o->maxbytes - o->stepbytes) {
                row_id++;
                break;
            }
            size += o->stepbytes;
        } else {
            double next = floor((double)size * o->stepfactor);

            if (next > (double)o->maxbytes || next <= (double)size) {
                row_id++;
                break;
            }
            size = (uint64_t)next;
        }
    }
    }
    }

    if (s.rank == 0) {
        if (!o->quiet && rc == 0) {
            fprintf(s.out, "# Out of bounds values : %.0f %s\n", wrong_total,
                    wrong_total == 0 ? "OK" : "FAILED");
            fprintf(s.out, "# Avg bus bandwidth    : %g \n",
                    nbw ? bw_sum / nbw : 0.0);
            if (s.ncoll > 1) {
                fprintf(s.out, "# Avg bus bandwidth %s : %g\n",
                        be->baseline_name, nrows ? bw_base_sum / nrows : 0.0);
                fprintf(s.out, "# Avg busbw ratio      : %g\n",
                        nratio ? ratio_sum / nratio : 0.0);
            }
            if (o->memory_report)
                fprintf(s.out, "# Memory: largest buffers of one rank %.0f "
                        "bytes (send + receive, %s)\n", max_buf,
                        s.dev ? "device, and as much pinned host" : "host");
            fprintf(s.out, "#\n# Collective test concluded: alltoallv\n");
            fflush(s.out);
        }
        if (rc == 0 && wrong_total != 0) {
            rc = 2;
            fprintf(stderr, "%s: data check failed (wrong values above)\n", be->name);
        }
        if (json != NULL) {
            fprintf(json, "{\n  \"tool\": ");
            perf_json_str(json, be->name);
            fprintf(json, ",\n  \"collective\": \"alltoallv\",\n  \"launch\": ");
            perf_json_str(json, be->launch ? be->launch : "");
            fprintf(json, ",\n  \"nranks\": %d,\n  \"nodes\": [", s.n);
            for (int k = 0; k < nnodes; k++)
                fprintf(json, "%s%d", k ? ", " : "", node_sizes[k]);
            fprintf(json, "],\n  \"nodes_contiguous\": %s,\n  \"dist\": ",
                    contig ? "true" : "false");
            perf_json_str(json, o->dist);
            fprintf(json, ",\n  \"seed\": %llu,\n  \"dtype\": ",
                    (unsigned long long)o->seed);
            perf_json_str(json, o->dtype_all ? "all" : perf_dtype_name(dtype));
            fprintf(json,
                    ",\n  \"iters\": %d,\n  \"warmup\": %d,\n  \"agg_iters\": %d,"
                    "\n  \"graph_launches\": %d,"
                    "\n  \"average\": \"%s\",\n  \"check\": %s,\n  \"check_iters\": %d,"
                    "\n  \"check_every\": %s,",
                    o->iters, o->warmup, o->agg_iters, o->graph_launches,
                    perf_average_name(o->average), o->check ? "true" : "false",
                    o->check_every ? o->iters : o->check,
                    o->check_every ? "true" : "false");
            fprintf(json, "\n  \"memory\": \"%s\",\n  \"local_register\": %d,"
                    "\n  \"host_alloc\": ", s.dev ? "cuda" : "host",
                    o->local_register);
            perf_json_str(json, perf_host_alloc_name(o, be));
            fprintf(json, ",\n  \"timing\": \"%s\",\n  \"baseline\": ",
                    s.dev && !o->cputime ? "cuda_events" : "host_clock");
            perf_json_str(json, s.ncoll > 1 ? be->baseline_name : "none");
            fprintf(json, ",\n  \"status\": ");
            perf_json_str(json, rc == 0 ? "ok" : rc == 2 ? "wrong" : "error");
            fprintf(json, ",\n  \"config\": {%s},\n  \"rows\": [",
                    be->json_config ? be->json_config : "");
            /* One object per size: the primary's fields at the top level
             * (as without a baseline), the baseline's under "baseline";
             * "in_place" is null (not supported). */
            for (int k = 0; k < nrows; k++) {
                const perf_row_t *w = &rows[2 * k];
                const perf_row_t *bl = &rows[2 * k + 1];

                fprintf(json,
                        "%s\n    {\"size\": %llu, \"count\": %llu, "
                        "\"type\": \"%s\", \"time_us\": %.3f, "
                        "\"time_min_us\": %.3f, \"max_rank_bytes\": %.0f, "
                        "\"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, "
                        "\"wrong\": %.0f, \"in_place\": null",
                        k ? "," : "", (unsigned long long)w->size,
                        (unsigned long long)w->count,
                        perf_dtype_name(w->dtype), w->time_us,
                        w->time_min_us, w->max_bytes, w->algbw, w->busbw,
                        w->wrong);
                if (s.ncoll > 1)
                    fprintf(json,
                            ", \"baseline\": {\"coll\": \"%s\", "
                            "\"time_us\": %.3f, \"time_min_us\": %.3f, "
                            "\"max_rank_bytes\": %.0f, \"algbw_gbs\": %.6f, "
                            "\"busbw_gbs\": %.6f, \"wrong\": %.0f}, "
                            "\"ratio_busbw\": %.6f",
                            be->baseline_name, bl->time_us, bl->time_min_us,
                            bl->max_bytes, bl->algbw, bl->busbw, bl->wrong,
                            bl->busbw > 0 ? w->busbw / bl->busbw : 0.0);
                fprintf(json, "}");
            }
            fprintf(json, "\n  ],\n  \"avg_busbw_gbs\": %.6f",
                    nbw ? bw_sum / nbw : 0.0);
            if (s.ncoll > 1)
                fprintf(json, ",\n  \"baseline_avg_busbw_gbs\": %.6f,"
                        "\n  \"avg_ratio_busbw\": %.6f",
                        nrows ? bw_base_sum / nrows : 0.0,
                        nratio ? ratio_sum / nratio : 0.0);
            fprintf(json, "\n}\n");
            if ((json == stdout ? fflush(json) : fclose(json)) != 0) {
                fprintf(stderr, "%s: --json %s: writing the file failed: %s\n", be->name,
                        o->json_stdout ? "-" : o->json_path, strerror(errno));
                json_failed = 1;
            }
            json = NULL;
        }
    }

out:
    if (json_failed && rc == 0)
        rc = 1;
    if (json != NULL && json != stdout)
        fclose(json);
    else if (json != NULL)
        fflush(json);
    free(devlines);
    free(rows);
    free(keys);
    free(s.gathered);
    free(s.sendcounts);
    rmacoll_case_free(matrix);
    return rc;
}
