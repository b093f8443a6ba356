# transports/ce/module.cmake - the copy-engine transport ("ce") for node peers.
# Host backend (cross-memory attach into the peer process + release stores
# into its shared control window) is always built when RMACOLL_ENABLE_CE is
# on. A CUDA backend (ce_cuda.c, defining RMACOLL_HAVE_CE_CUDA) joins here
# later. Included from transports/CMakeLists.txt in the same scope.
if(RMACOLL_ENABLE_CE)
  list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/ce_host.c)
  list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_CE=1)
  list(APPEND RMACOLL_TRANSPORT_SYMBOLS rmacoll_transport_ce_ops)
  list(APPEND RMACOLL_TRANSPORT_NAMES "ce")
endif()
