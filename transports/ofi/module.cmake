# transports/ofi/module.cmake - the libfabric transport ("ofi").
# include()d from transports/CMakeLists.txt: variables are set in that scope;
# the imported target is GLOBAL because the library is made at the top.
if(RMACOLL_ENABLE_OFI)
  pkg_check_modules(LIBFABRIC IMPORTED_TARGET GLOBAL libfabric)
  if(LIBFABRIC_FOUND)
    list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/ofi.c ${CMAKE_CURRENT_LIST_DIR}/ofi_select.c
                                ${CMAKE_CURRENT_LIST_DIR}/ofi_init.c ${CMAKE_CURRENT_LIST_DIR}/ofi_mr.c
                                ${CMAKE_CURRENT_LIST_DIR}/ofi_put.c ${CMAKE_CURRENT_LIST_DIR}/ofi_ipc_warm.c)
    list(APPEND RMACOLL_LIBS PkgConfig::LIBFABRIC)
    list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_OFI=1)
    list(APPEND RMACOLL_TRANSPORT_SYMBOLS rmacoll_transport_ofi_ops)
    list(APPEND RMACOLL_TRANSPORT_NAMES ofi)
    if(RMACOLL_HAVE_CUDA)
      # device memory through FI_HMEM when the provider offers it (found at
      # run time); the pointer's device comes from transports/common/cuda_common.c
      list(APPEND RMACOLL_DEFINES RMACOLL_OFI_CUDA=1)
    endif()
    message(STATUS "rmacoll: ofi transport enabled (libfabric ${LIBFABRIC_VERSION})")
  else()
    message(STATUS "rmacoll: ofi transport disabled (libfabric not found by pkg-config)")
  endif()
endif()
# The keys (ofi_keys.c) are compiled in every build: a config naming them loads
# everywhere, and rmacoll-info lists them.
list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/ofi_keys.c)
list(APPEND RMACOLL_TRANSPORT_KEYSETS rmacoll_transport_ofi_keyset)
