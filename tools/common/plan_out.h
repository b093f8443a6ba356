/*
 * plan_out.h - rmacoll-plan's output (tools/plan.c; formats in
 * docs/plan-format.md and docs/sim.md): the plans with their totals per
 * round and per link, the planner benchmark's line, the --sim rows, the
 * failure of a call, the --check verdict and the --write-load file; text,
 * or JSON with --json (printed piece by piece to stdout).
 */
#ifndef RMACOLL_TOOLS_PLAN_OUT_H
#define RMACOLL_TOOLS_PLAN_OUT_H

#include <stdint.h>

#include "cases.h"
#include "core/plan/plan.h"
#include "refexec.h"
#include "rmacoll.h"
#include "sim.h"

/** Prints a JSON string (names and messages carry no control bytes but
 *  may carry quotes). */
void plan_json_str(const char *s);

/** Prints the plans (all, or rank `only`) and their totals; with json the
 *  object is left open for what follows. -1: out of memory. */
int plan_print_plans(const rmacoll__plan_t *const *plans,
                     const rmacoll_topo_t *topo, const rmacoll_case_t *c,
                     const refexec_opts_t *op, int only, int json);

/** --bench's line: `bench` builds of rank r's plan, 5 times; best and med
 *  the minimum and median us per build. */
void plan_print_bench(const rmacoll_case_t *c, const rmacoll_topo_t *topo,
                      const refexec_opts_t *op, int r,
                      const rmacoll__plan_t *plan, int bench, double best,
                      double med, int json);

/** --sim's header (JSON: the object up to its open "results" list). */
void plan_print_sim_head(const rmacoll_case_t *c, const refexec_opts_t *op,
                         const sim_model_t *model, uint64_t min_relay, int json);
/** The k-th scheduler's failure (JSON only: the message is on stderr). */
void plan_print_sim_error(const char *name, int k, rmacoll_status_t st,
                          const char *msg, int json);
/** The k-th scheduler's row; the text's footnote after the last one. */
void plan_print_sim_row(const char *name, int k, int last,
                        const sim_result_t *res, const sim_model_t *model,
                        int json);

/** A call that fails on every rank (refexec_prepare's status st): the
 *  ranks that said why, on stderr, and with json the object on stdout. */
void plan_print_failure(const rmacoll_case_t *c, const refexec_t *ex,
                        rmacoll_status_t st, int json);

/** --check's verdict (rc 0: ok) of the calls in res. */
void plan_print_check(int rc, const refexec_result_t *res, int virtual_mode,
                      int json);

/** --write-load FILE: node-to-node bytes, for RMACOLL_LARGEST_FIRST_LOAD.
 *  0, or 2 with the message printed. */
int plan_write_load(const rmacoll_case_t *c, const char *path);

#endif /* RMACOLL_TOOLS_PLAN_OUT_H */
