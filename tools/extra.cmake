# tools/extra.cmake - included by tools/CMakeLists.txt after the tools:
# CUDA memory and the NCCL baseline of rmacoll-perf (when the CUDA toolkit
# / NCCL are found), the MPI_Alltoallv baseline (when MPI is found) and
# smoke tests of rmacoll-perf's option parsing.

# rmacoll-perf --memory cuda: the CUDA runtime (never libcuda) in the tool
# only. --baseline nccl: libnccl too. Both optional; without them the
# options fail with a clear message at run time.
if(TARGET rmacoll-perf AND RMACOLL_HAVE_CUDA AND TARGET CUDA::cudart)
  target_link_libraries(rmacoll-perf PRIVATE CUDA::cudart)
  target_compile_definitions(rmacoll-perf PRIVATE RMACOLL_PERF_HAVE_CUDA=1)
  # Same search as cmake/nccl.cmake (cache variables are shared).
  if(RMACOLL_ENABLE_NCCL)
    find_path(NCCL_INCLUDE_DIR nccl.h
      HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_INCLUDE_DIRS}
      PATHS /usr/local/cuda /usr PATH_SUFFIXES include)
    find_library(NCCL_LIB nccl
      HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_DIR}
      PATHS /usr/local/cuda/lib64 /usr/local/cuda /usr
      PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  endif()
  if(RMACOLL_ENABLE_NCCL AND NCCL_INCLUDE_DIR AND NCCL_LIB)
    target_include_directories(rmacoll-perf PRIVATE ${NCCL_INCLUDE_DIR})
    target_link_libraries(rmacoll-perf PRIVATE ${NCCL_LIB})
    target_compile_definitions(rmacoll-perf PRIVATE RMACOLL_PERF_HAVE_NCCL=1)
    message(STATUS "rmacoll: rmacoll-perf --memory cuda and --baseline nccl enabled (${NCCL_LIB})")
  else()
    message(STATUS "rmacoll: rmacoll-perf --memory cuda enabled; NCCL not found, no --baseline nccl")
  endif()
  # --gemm (SM interference): cuBLAS in rmacoll-perf only, when the toolkit
  # has it; without it the option fails with a clear message at run time.
  if(TARGET CUDA::cublas)
    target_link_libraries(rmacoll-perf PRIVATE CUDA::cublas)
    target_compile_definitions(rmacoll-perf PRIVATE RMACOLL_PERF_HAVE_CUBLAS=1)
    message(STATUS "rmacoll: rmacoll-perf --gemm enabled (cuBLAS)")
  else()
    message(STATUS "rmacoll: cuBLAS not found; rmacoll-perf --gemm disabled")
  endif()
endif()

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  # Installed as rmacoll-mpi-perf (an rmacoll- name in bin/); the build
  # tree keeps mpi_alltoallv_perf too (a link) for existing scripts.
  add_executable(rmacoll-mpi-perf ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_alltoallv_perf.c)
  # Same counts, fill, check and columns as rmacoll-perf: tools/common.
  target_link_libraries(rmacoll-mpi-perf PRIVATE rmacoll_toolsupport rmacoll_static MPI::MPI_C)
  target_include_directories(rmacoll-mpi-perf PRIVATE ${PROJECT_SOURCE_DIR})
  add_custom_command(TARGET rmacoll-mpi-perf POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E create_symlink rmacoll-mpi-perf mpi_alltoallv_perf
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  install(TARGETS rmacoll-mpi-perf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  message(STATUS "rmacoll: MPI baseline rmacoll-mpi-perf enabled (${MPI_C_LIBRARIES})")
else()
  message(STATUS "rmacoll: MPI not found; rmacoll-mpi-perf not built")
endif()

# include(CTest) / enable_testing() run after tools/ in the top-level
# CMakeLists, so on a first configure BUILD_TESTING is not defined yet and
# add_test here would be ignored: follow RMACOLL_BUILD_TESTS then (and
# BUILD_TESTING once it exists), and enable testing in this directory.
if(RMACOLL_BUILD_TESTS AND (NOT DEFINED BUILD_TESTING OR BUILD_TESTING)
   AND TARGET rmacoll-perf)
  enable_testing()
  add_test(NAME perf_help COMMAND rmacoll-perf --help)
  set_tests_properties(perf_help PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "usage: .*--dist")
  # A bad option must fail (exit 2), not start ranks.
  add_test(NAME perf_bad_option COMMAND rmacoll-perf --no-such-option)
  set_tests_properties(perf_bad_option PROPERTIES TIMEOUT 30 WILL_FAIL TRUE)
  # --baseline nccl without --memory cuda is refused before anything starts.
  add_test(NAME perf_baseline_needs_cuda COMMAND rmacoll-perf --baseline nccl)
  set_tests_properties(perf_baseline_needs_cuda PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--baseline nccl needs --memory cuda")
  # --gemm without --memory cuda, and a bad --gemm, are refused up front.
  add_test(NAME perf_gemm_needs_cuda COMMAND rmacoll-perf --gemm 1024)
  set_tests_properties(perf_gemm_needs_cuda PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--gemm needs --memory cuda")
  add_test(NAME perf_gemm_bad_size COMMAND rmacoll-perf --memory cuda --gemm 0)
  set_tests_properties(perf_gemm_bad_size PROPERTIES TIMEOUT 30 WILL_FAIL TRUE)
  add_test(NAME perf_help_gemm COMMAND rmacoll-perf --help)
  set_tests_properties(perf_help_gemm PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--gemm N.*--gemm-iters K")
  add_test(NAME perf_help_gpu COMMAND rmacoll-perf --help)
  set_tests_properties(perf_help_gpu PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--memory host\\|cuda.*--baseline none\\|nccl")
endif()
