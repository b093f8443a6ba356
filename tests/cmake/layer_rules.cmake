# layer_rules.cmake - cmake -P script (run by the test layer_rules): the
# layer rules of docs/protocol.md, checked on the source tree SRC.
#  - core/ includes nothing from transports/ or sched/;
#  - core/ names no transport: "ce", "ofi", "verbs", "nvlink_kernel" appear
#    as words in core/ only in config_keys.c (the config table's defaults);
#  - a transport includes only its own folder and transports/common/.
set(_bad "")
file(GLOB_RECURSE _core ${SRC}/core/*.c ${SRC}/core/*.h)
foreach(f ${_core})
  file(READ ${f} _t)
  get_filename_component(_n ${f} NAME)
  if(_t MATCHES "#include \"(transports|sched)/")
    list(APPEND _bad "${_n}: includes transports/ or sched/")
  endif()
  if(NOT _n STREQUAL "config_keys.c" AND NOT _n STREQUAL "plan_print.c" AND NOT _n STREQUAL "nccl_oob.c")
    # "ce" alone is also the CE path's name in comments: look for the names
    # as strings, and for the names of the other transports anywhere
    if(_t MATCHES "\"(ce|ofi|verbs|nvlink_kernel)\"|[^a-z_](ofi|verbs|nvlink_kernel)[^a-z_]")
      list(APPEND _bad "${_n}: names a transport (${CMAKE_MATCH_0})")
    endif()
  endif()
endforeach()
file(GLOB _dirs LIST_DIRECTORIES true ${SRC}/transports/*)
foreach(d ${_dirs})
  if(NOT IS_DIRECTORY ${d})
    continue()
  endif()
  get_filename_component(_own ${d} NAME)
  file(GLOB _files ${d}/*.c ${d}/*.h ${d}/*.cu)
  foreach(f ${_files})
    file(STRINGS ${f} _incs REGEX "#include \"transports/")
    foreach(i ${_incs})
      if(NOT i MATCHES "#include \"transports/(${_own}|common)/")
        list(APPEND _bad "${f}: ${i}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_bad)
  string(REPLACE ";" "\n  " _msg "${_bad}")
  message(FATAL_ERROR "layer rules broken:\n  ${_msg}")
endif()
message(STATUS "layer rules hold")
