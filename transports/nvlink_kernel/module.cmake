# transports/nvlink_kernel/module.cmake - the nvlink_kernel transport: a CUDA
# kernel copies a queue of small puts over IPC-mapped peer pointers and
# raises the signals (nvl.cu), host side in nvl.c and nvl_stream.c. Built only with CUDA
# (RMACOLL_HAVE_CUDA from the top CMakeLists; CMAKE_CUDA_ARCHITECTURES
# defaults to 90 there). Links libcudart only, never libcuda.
# Included from transports/CMakeLists.txt in the same scope.
if(RMACOLL_HAVE_CUDA)
  list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/nvl.c
                              ${CMAKE_CURRENT_LIST_DIR}/nvl_stream.c
                              ${CMAKE_CURRENT_LIST_DIR}/nvl.cu)
  list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_NVLINK_KERNEL=1)
  list(APPEND RMACOLL_TRANSPORT_SYMBOLS rmacoll_transport_nvlink_kernel_ops)
  list(APPEND RMACOLL_TRANSPORT_NAMES "nvlink_kernel")
  list(APPEND RMACOLL_LIBS CUDA::cudart)
endif()

# The keys (nvl_keys.c) are compiled in every build: a config naming them loads
# everywhere, and rmacoll-info lists them.
list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/nvl_keys.c)
list(APPEND RMACOLL_TRANSPORT_KEYSETS rmacoll_transport_nvlink_kernel_keyset)
