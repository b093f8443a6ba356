# transports/ce/module.cmake - the copy-engine transport ("ce") for node peers.
# Host backend (cross-memory attach into the peer process + release stores
# into its shared control window) is always built when RMACOLL_ENABLE_CE is
# on. With CUDA (RMACOLL_HAVE_CUDA, set by the top CMakeLists when nvcc and
# the toolkit are found) the CUDA backend ce_cuda.c joins it, defining
# RMACOLL_HAVE_CE_CUDA: copy engine over CUDA IPC, stream memory operations
# for signals. It links libcudart only; driver functions are resolved at run
# time (cudaGetDriverEntryPointByVersion), never by linking libcuda.
# Included from transports/CMakeLists.txt in the same scope.
if(RMACOLL_ENABLE_CE)
  list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/ce_host.c
                              ${CMAKE_CURRENT_LIST_DIR}/ce_init.c
                              ${CMAKE_CURRENT_LIST_DIR}/ce_shared.c)
  list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_CE=1)
  list(APPEND RMACOLL_TRANSPORT_SYMBOLS rmacoll_transport_ce_ops)
  list(APPEND RMACOLL_TRANSPORT_NAMES "ce")
  if(RMACOLL_HAVE_CUDA)
    list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/ce_cuda.c)
    list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_CE_CUDA=1)
    list(APPEND RMACOLL_LIBS CUDA::cudart)
  endif()
endif()
