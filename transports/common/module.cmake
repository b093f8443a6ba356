# transports/common/module.cmake - helpers transports share (a transport
# includes only its own folder and transports/common/): tlog.h (logging),
# tclock.h (the monotonic clock), tops.h (ops-table initialisers and init
# checks), and cuda_common.h: the CUDA machinery of the transports that move
# device memory between node peers (ce's CUDA backend, nvlink_kernel), in
# cuda_common.c, cuda_open.c, cuda_ipc.c and cuda_stream.c (cuda_internal.h
# says which does what); built with CUDA when either is.
# Included from transports/CMakeLists.txt in the same scope.
if(RMACOLL_HAVE_CUDA)  # nvlink_kernel is built whenever CUDA is
  list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_common.c
                              ${CMAKE_CURRENT_LIST_DIR}/cuda_open.c
                              ${CMAKE_CURRENT_LIST_DIR}/cuda_ipc.c
                              ${CMAKE_CURRENT_LIST_DIR}/cuda_stream.c)
  list(APPEND RMACOLL_LIBS CUDA::cudart)
endif()
