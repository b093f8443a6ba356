/*
 * planjson.h - one rank's plan as a JSON object (rmacoll-plan --json; the
 * format is docs/plan-format.md's), built with cJSON (tjson.h):
 *   {"rank":R,"node":N,"local_rank":L,"batches":[{"round":K,"queues":
 *    {"proxyPut":[task...],"cePut":[...],"proxyWait":[...],"ceWait":[...]},
 *    "bytes":B},...],"links":[{"src":R,"dst":P,"path":"proxy"|"ce",
 *    "bytes":B},...]}
 * a task: {"op":"put"|"wait","kind":...,"peer":P,"origin":O,"src":{"win":W,
 * "off":X},"dst":{...},"bytes":B,"seq":S[,"signal":{"index":I,"value":V}]}.
 */
#ifndef RMACOLL_TOOLS_PLANJSON_H
#define RMACOLL_TOOLS_PLANJSON_H

#include <stdio.h>

#include "core/plan/plan.h"

/** Prints plan's object to out, compact, then a newline. */
void planjson_print(FILE *out, const rmacoll__plan_t *plan, const rmacoll_topo_t *topo);

#endif /* RMACOLL_TOOLS_PLANJSON_H */
