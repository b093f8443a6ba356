# transports/nvlink_kernel/module.cmake - the nvlink_kernel transport: a CUDA
# kernel copies a queue of small puts over IPC-mapped peer pointers and
# raises the signals (nvl.cu), host side in nvl.c. Built only with CUDA
# (RMACOLL_HAVE_CUDA from the top CMakeLists; CMAKE_CUDA_ARCHITECTURES
# defaults to 90 there). Links libcudart only, never libcuda.
# Included from transports/CMakeLists.txt in the same scope.
if(RMACOLL_HAVE_CUDA)
  # One CUDA runtime per process: the shared libcudart of CUDA::cudart
  # (CMake's default for nvcc-compiled targets would add cudart_static
  # too). A cache entry, so that it reaches the top directory's targets.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared CACHE STRING "CUDA runtime: Shared (rmacoll links libcudart)")
  list(APPEND RMACOLL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/nvl.c
                              ${CMAKE_CURRENT_LIST_DIR}/nvl.cu)
  list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_NVLINK_KERNEL=1)
  list(APPEND RMACOLL_TRANSPORT_SYMBOLS rmacoll_transport_nvlink_kernel_ops)
  list(APPEND RMACOLL_TRANSPORT_NAMES "nvlink_kernel")
  list(APPEND RMACOLL_LIBS CUDA::cudart)
endif()

# The top CMakeLists adds GCC warning flags (-Wall ... -Werror, sanitizers)
# with add_compile_options, which reach nvcc too ("Value '-MD' is not defined
# for option 'Werror'"). Until the top file guards them with
# $<COMPILE_LANGUAGE:C>, restrict the top directory's options to non-CUDA
# sources here, and give nvcc its own: warnings as errors for nvcc's own
# diagnostics, -Wall for the host compiler behind it.
if(RMACOLL_HAVE_CUDA AND NOT RMACOLL__NVL_OPTIONS_GUARDED)
  set(RMACOLL__NVL_OPTIONS_GUARDED ON)
  get_property(_nvl_opts DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY COMPILE_OPTIONS)
  set(_nvl_guarded "")
  foreach(_o IN LISTS _nvl_opts)
    if(_o MATCHES "COMPILE_LANGUAGE")
      list(APPEND _nvl_guarded "${_o}")   # already language-specific
    else()
      list(APPEND _nvl_guarded "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${_o}>")
    endif()
  endforeach()
  list(APPEND _nvl_guarded "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>")
  if(RMACOLL_WERROR)
    list(APPEND _nvl_guarded "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
  endif()
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY COMPILE_OPTIONS "${_nvl_guarded}")
endif()
