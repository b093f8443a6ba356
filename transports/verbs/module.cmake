# transports/verbs/module.cmake - the rdma-core ibverbs transport (RC QPs,
# RDMA WRITE / WRITE_WITH_IMM). Included from transports/CMakeLists.txt in
# its scope. Built whenever libibverbs and its header are found; no RDMA
# device is needed to build it (the unit tests fake the verbs boundary).
# It is built as a loadable module, librmacoll-verbs.so, next to
# librmacoll.so (and installed next to it): librmacoll does not link
# libibverbs, and the core loads the module by name when the config asks for
# verbs (core/xport/transport.c, rmacoll__tops_module_path). The module carries its
# own copy of the status strings (core/base/status.c) and of its key table, so it
# needs nothing of librmacoll at load time. In a CUDA build it links
# libcudart for the GPUDirect helpers (transports/common/cuda_common.h, whose
# driver entry-point lookup it shares with ce and nvlink_kernel).
if(RMACOLL_ENABLE_VERBS)
  find_library(IBVERBS_LIB ibverbs)
  include(CheckIncludeFile)
  check_include_file(infiniband/verbs.h RMACOLL_HAVE_VERBS_H)
  if(IBVERBS_LIB AND RMACOLL_HAVE_VERBS_H)
    # the transport's own files; tests/cmake/test_verbs.cmake links them
    # too (property RMACOLL_TRANSPORT_SOURCES)
    set(_verbs_sources ${CMAKE_CURRENT_LIST_DIR}/verbs.c ${CMAKE_CURRENT_LIST_DIR}/verbs_device.c
        ${CMAKE_CURRENT_LIST_DIR}/verbs_init.c ${CMAKE_CURRENT_LIST_DIR}/verbs_mr.c
        ${CMAKE_CURRENT_LIST_DIR}/verbs_put.c)
    add_library(rmacoll-verbs MODULE ${_verbs_sources}
                ${CMAKE_CURRENT_LIST_DIR}/verbs_keys.c ${PROJECT_SOURCE_DIR}/core/base/status.c)
    set_target_properties(rmacoll-verbs PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
                                                   RMACOLL_TRANSPORT_SOURCES "${_verbs_sources}")
    target_include_directories(rmacoll-verbs PRIVATE ${PROJECT_SOURCE_DIR}/include
                                                     ${PROJECT_SOURCE_DIR})
    target_compile_definitions(rmacoll-verbs PRIVATE RMACOLL_VERBS_MODULE=1)
    target_link_libraries(rmacoll-verbs PRIVATE ${IBVERBS_LIB} Threads::Threads)
    if(RMACOLL_HAVE_CUDA)  # GPUDirect helpers: transports/common/cuda_common.h
      target_link_libraries(rmacoll-verbs PRIVATE CUDA::cudart)
      target_compile_definitions(rmacoll-verbs PRIVATE RMACOLL_VERBS_CUDA=1)
    endif()
    install(TARGETS rmacoll-verbs LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
    list(APPEND RMACOLL_TRANSPORT_MODULES verbs)
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
