# cmake/nccl.cmake - NCCL detection, and the NCCL bootstrap of the library
# (core/comm/nccl_oob.c: rmacoll_comm_create_from_nccl, include/rmacoll_nccl.h).
#
# Include from the top-level CMakeLists after the CUDA section (it reads
# RMACOLL_HAVE_CUDA) and BEFORE add_library(rmacoll_obj ...):
#     include(cmake/nccl.cmake)
# When RMACOLL_ENABLE_NCCL is on, CUDA was found and nccl.h + libnccl exist
# (default search: NCCL_ROOT, $NCCL_HOME, the CUDA toolkit, /usr/local/cuda,
# system paths), it appends to RMACOLL_SOURCES / RMACOLL_LIBS /
# RMACOLL_DEFINES:
#   - core/comm/nccl_oob.c (already globbed with core/*.c; duplicates are
#     dropped by add_library, so the order relative to the glob is free);
#   - CUDA::cudart (never libcuda); NOT libnccl: nccl_oob.c loads it at
#     run time with dlopen (libnccl.so.2, or RMACOLL_NCCL_LIBRARY), so
#     librmacoll.so does not NEED libnccl and host-only users need no NCCL;
#   - RMACOLL_HAVE_NCCL=1 (nccl_oob.c compiles to nothing without it);
# adds the NCCL include directory to that one source file, installs
# include/rmacoll_nccl.h, and sets in the including scope:
#   RMACOLL_HAVE_NCCL (ON/OFF), NCCL_INCLUDE_DIR, NCCL_LIB.
# The tools and tests reuse NCCL_LIB / NCCL_INCLUDE_DIR (cache variables).
set(RMACOLL_HAVE_NCCL OFF)
if(RMACOLL_ENABLE_NCCL AND RMACOLL_HAVE_CUDA)
  set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME})
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT})
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
    PATHS /usr/local/cuda /usr
    PATH_SUFFIXES include)
  find_library(NCCL_LIB nccl
    HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
    PATHS /usr/local/cuda/lib64 /usr/local/cuda /usr
    PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  if(NCCL_INCLUDE_DIR AND NCCL_LIB AND TARGET CUDA::cudart)
    set(RMACOLL_HAVE_NCCL ON)
    set(_nccl_src ${PROJECT_SOURCE_DIR}/core/comm/nccl_oob.c)
    list(APPEND RMACOLL_SOURCES ${_nccl_src})
    list(REMOVE_DUPLICATES RMACOLL_SOURCES)
    list(APPEND RMACOLL_LIBS CUDA::cudart)   # libnccl: dlopen at run time
    list(APPEND RMACOLL_DEFINES RMACOLL_HAVE_NCCL=1)
    set_source_files_properties(${_nccl_src} PROPERTIES
      INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR};${CUDAToolkit_INCLUDE_DIRS}")
    install(FILES ${PROJECT_SOURCE_DIR}/include/rmacoll_nccl.h
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    message(STATUS "rmacoll: NCCL bootstrap enabled (${NCCL_LIB})")
  else()
    message(STATUS "rmacoll: NCCL not found (nccl.h: ${NCCL_INCLUDE_DIR}, "
                   "libnccl: ${NCCL_LIB}); rmacoll_comm_create_from_nccl not built")
  endif()
elseif(RMACOLL_ENABLE_NCCL)
  message(STATUS "rmacoll: no CUDA toolkit; NCCL parts not built")
endif()
