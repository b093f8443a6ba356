/*
 * sim.h - a fabric model and a simulator that replays rmacoll's real plans
 * (rmacoll__plan_build, the planner output the runtime executes) over it,
 * for scheduler research: makespan, per-round link load, busiest link,
 * critical path, and the ratio to the bandwidth lower bound. docs/sim.md
 * describes the model, its parameters and what is approximated.
 *
 * Model. Every rank (GPU) has seven links, each with a bandwidth in bytes
 * per second: NIC_TX and NIC_RX (its rail's NIC, one per direction),
 * PCIE_TX / PCIE_RX (GPU <-> NIC, GPUDirect), NVL_TX / NVL_RX (copy engine
 * over NVLink, one way) and NVL_BI (NVLink, both directions together), and
 * SELF (a local copy). A proxy put i -> j crosses PCIE_TX(i), NIC_TX(i),
 * NIC_RX(j), PCIE_RX(j); a CE put crosses NVL_TX(i), NVL_BI(i), NVL_RX(j),
 * NVL_BI(j); a self copy crosses SELF(i). The rail switch is non-blocking
 * (rail-only or rail-optimised fabrics: a relayed plan only uses same-rail
 * NIC pairs). Flows that share a link share its bandwidth: each active
 * flow gets the smallest (bandwidth / active flows) over its links (a
 * bottleneck fair share, not full max-min).
 *
 * Execution, as the runtime runs a plan: dataflow (core/plan/flow.h).
 * Each rank's tasks are lanes of steps (a step: one wait, or puts of one
 * path and round); a lane runs in its order, a wait blocks only its lane,
 * and the FINAL lane (data waits) is walked once every other lane is
 * done. The rank's one thread issues one submission at a time: among the
 * lanes whose head step is ready, the step whose first task comes first in
 * the plan, merged with the ready head steps of the other lanes on its
 * path (flow.h "Merging", at most cfg.merge_max_puts CE puts); a head wait
 * that holds is consumed at no cost; nothing ready, it blocks until a
 * signal makes a head wait hold. Proxy puts are posted one after the other
 * (host cost put_s each), each starting when its (src, dst) queue pair is
 * free (puts of one pair are FIFO, different pairs run concurrently); the
 * copies of a CE submission start ce_lat after the issue and ce_copy_s
 * apart, run together (sharing the links) and hold the thread until the
 * last is done. After each submission the thread is busy batch_s (the
 * cost of one step) before it picks again. A signal becomes
 * visible nic_lat_s after a proxy put's last byte, at once after a CE
 * put's. A rank is done when its FINAL waits hold and its proxy puts are
 * flushed. Events at the same instant run in a fixed order: flow ends,
 * signals, posts, CE starts, the threads' picks, then by flow or rank and
 * task.
 *
 * Thread-safety: none needed (no global state); one run per call.
 */
#ifndef RMACOLL_TOOLS_SIM_H
#define RMACOLL_TOOLS_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cases.h"
#include "core/plan/plan.h"

/** Link classes of a rank. */
typedef enum sim_link_class {
    SIM_NIC_TX = 0, SIM_NIC_RX, SIM_PCIE_TX, SIM_PCIE_RX,
    SIM_NVL_TX, SIM_NVL_RX, SIM_NVL_BI, SIM_SELF, SIM_NCLASSES
} sim_link_class_t;

/* Puts one nvlink_kernel launch copies (transports/nvlink_kernel/nvl.h
 * RMACOLL__NVL_MAX_ENTRIES); a submission of more is several launches. */
#define SIM_KERNEL_PUTS 64u

/** Fabric parameters, SI units (bytes per second, seconds). */
typedef struct sim_model {
    char name[128];
    double nic_bw, nic_lat;        /* per rail, per direction */
    double pcie_bw;                /* per direction; 0 = not a limit */
    double ce_bw, ce_bidir_bw, ce_lat;  /* per GPU; bidir 0 = no cap */
    double ce_copy_s;              /* each further copy of one CE submission
                                      (YAML key nvlink.copy_us) */
    double ce_kernel_s;            /* one nvlink_kernel launch of up to
                                      SIM_KERNEL_PUTS small puts, submission
                                      to completion (YAML nvlink.kernel_us) */
    double self_bw;
    double put_s, batch_s;         /* host cost per posted put, per step
                                      issued (YAML key batch_us) */
    double call_s;                 /* per call before the data rounds
                                      (validate, metadata, agreement); 0 */
} sim_model_t;

/** Defaults: H200 + ConnectX-7, sources in docs/sim.md. */
void sim_model_defaults(sim_model_t *m);

/**
 * Reads a model YAML (docs/sim.md; every key optional, unknown keys are
 * errors) over the defaults. Errors: RMACOLL_ERR_CONFIG with err =
 * "FILE: cause" (libcyaml's message, or the key and the bad value).
 */
rmacoll_status_t sim_model_load(const char *path, sim_model_t *m, char *err,
                                size_t errlen);

/** Prints the model as YAML (loadable by sim_model_load). */
void sim_model_print(FILE *out, const sim_model_t *m);

typedef struct sim_opts {
    const char *scheduler;         /* built-in name */
    const char *scheduler_plugin;  /* or a plugin path, or NULL */
    uint64_t sched_seed;
    rmacoll__plan_cfg_t cfg;
    /* CE submissions whose largest put has at most this many bytes run as
     * nvlink_kernel launches (transports.intra_node auto: its
     * nvlink_kernel_threshold; nvlink_kernel: UINT64_MAX); 0 = copy engine
     * only (intra_node ce, the default). */
    uint64_t kernel_max_bytes;
    /* Rails to simulate: 0 = all. K > 0 (equal node sizes, relay on):
     * only the K rails with the most NIC bytes; see docs/sim.md. */
    int rails;
    /* Pictures (NULL = none): a Gantt of the links of the first
     * trace_ranks simulated ranks, and a heat map of NIC load per round. */
    const char *gantt_svg, *heat_svg;
    int trace_ranks;               /* default 8 */
    /* Give a count-aware scheduler the case's node-to-node bytes
     * (rmacoll_sched_ops_t.set_load) when it has the hook. Default 1. */
    int feed_load;
} sim_opts_t;

typedef struct sim_result {
    double makespan;               /* seconds, the slowest rank's end */
    double bound_nic, bound_nvl;   /* lower bounds, seconds */
    double bound;                  /* the larger */
    double ratio;                  /* makespan / bound */
    int nrounds;                   /* highest round + 1 over all plans */
    int nranks_sim;                /* ranks simulated */
    int rails_sim, rails;          /* rails simulated / in the topology */
    uint64_t ntasks, nflows;
    uint64_t nevents;              /* events scheduled; a flow's end counts
                                      again on every rate change of a link
                                      it shares */
    uint64_t peak_round_link_bytes;  /* most bytes on one link in one round */
    int peak_round, peak_round_rank, peak_round_class;
    int busiest_rank, busiest_class;   /* link with the longest busy time */
    double busiest_busy;           /* its busy seconds */
    uint64_t busiest_bytes;
    double max_nic_bytes;          /* most loaded NIC direction, bytes */
    /* Critical path from the last rank back to time 0: seconds spent in
     * transfers (NIC / CE), in latency, in host costs, in queueing behind
     * other flows; steps = steps issued on it; hops = rank changes. */
    double cp_nic, cp_ce, cp_lat, cp_host, cp_queue;
    int cp_steps, cp_hops, cp_last_rank;
    double plan_s, sim_s;          /* wall time of planning, of simulating */
    char msg[1024];                /* error text */
} sim_result_t;

void sim_opts_init(sim_opts_t *o);

/**
 * Plans every simulated rank of case c (no mismatch) with the options and
 * simulates one call. Errors: RMACOLL_ERR_INVALID_ARG (rails on uneven
 * nodes or with the relay off; res->msg says), RMACOLL_ERR_CONFIG (unknown
 * scheduler), the planner's errors, RMACOLL_ERR_NO_MEMORY.
 */
rmacoll_status_t sim_run(const rmacoll_case_t *c, const sim_model_t *m,
                         const sim_opts_t *o, sim_result_t *res);

/** Link class name ("nic_tx", ...). */
const char *sim_class_name(int cls);

#endif /* RMACOLL_TOOLS_SIM_H */
