# transports/verbs/module.cmake - the rdma-core ibverbs transport (RC QPs,
# RDMA WRITE / WRITE_WITH_IMM). Included from transports/CMakeLists.txt in
# its scope. Built whenever libibverbs and its header are found; no RDMA
# device is needed to build it (the unit tests fake the verbs boundary).
if(RMACOLL_ENABLE_VERBS)
  find_library(IBVERBS_LIB ibverbs)
  include(CheckIncludeFile)
  check_include_file(infiniband/verbs.h RMACOLL_HAVE_VERBS_H)
  if(IBVERBS_LIB AND RMACOLL_HAVE_VERBS_H)
    list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/verbs.c)
    list(APPEND RMACOLL_LIBS ${IBVERBS_LIB})
    list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_VERBS=1)
    list(APPEND RMACOLL_TRANSPORT_SYMBOLS rmacoll_transport_verbs_ops)
    list(APPEND RMACOLL_TRANSPORT_NAMES verbs)
    set(RMACOLL_HAVE_VERBS ON)
    message(STATUS "rmacoll: verbs transport enabled (${IBVERBS_LIB})")
  else()
    set(RMACOLL_HAVE_VERBS OFF)
    message(STATUS "rmacoll: verbs transport disabled (libibverbs or infiniband/verbs.h not found)")
  endif()
endif()
# The keys (verbs_keys.c) are compiled in every build: a config naming them loads
# everywhere, and rmacoll-info lists them.
list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/verbs_keys.c)
list(APPEND RMACOLL_TRANSPORT_KEYSETS rmacoll_transport_verbs_keyset)
