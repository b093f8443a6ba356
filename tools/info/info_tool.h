/*
 * info_tool.h - what the two pieces of rmacoll-info share (tools/info.c,
 * the build and configuration report and main; tools/info/runtime.c, the
 * run-time report). Not installed, not used by other tools.
 */
#ifndef RMACOLL_TOOLS_INFO_TOOL_H
#define RMACOLL_TOOLS_INFO_TOOL_H

#include <stddef.h>

/* RMACOLL_<KEY> of a config key: dots to '_', upper case (info.c). */
void info_env_name(const char *key, char *buf, size_t len);

/* The whole run-time report, text or one JSON object (runtime.c). */
void info_runtime(int json);

#endif /* RMACOLL_TOOLS_INFO_TOOL_H */
