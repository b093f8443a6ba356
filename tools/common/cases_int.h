/*
 * cases_int.h - what the pieces of the case module share (cases.c,
 * cases_parse.c, cases_fill.c; not for the users of cases.h).
 */
#ifndef RMACOLL_TOOLS_CASES_INT_H
#define RMACOLL_TOOLS_CASES_INT_H

/* The most ranks a case may have (files, specs and generators). */
#define CASE_MAX_RANKS 65536

#endif /* RMACOLL_TOOLS_CASES_INT_H */
