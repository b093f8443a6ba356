# tools/extra.cmake - included by tools/CMakeLists.txt after the tools:
# the MPI_Alltoallv baseline of rmacoll-perf (when MPI is found) and a
# smoke test of rmacoll-perf's option parsing.

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(mpi_alltoallv_perf ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_alltoallv_perf.c)
  # Same counts, fill, check and columns as rmacoll-perf: tools/common.
  target_link_libraries(mpi_alltoallv_perf PRIVATE rmacoll_toolsupport rmacoll_static MPI::MPI_C)
  target_include_directories(mpi_alltoallv_perf PRIVATE ${PROJECT_SOURCE_DIR})
  install(TARGETS mpi_alltoallv_perf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  message(STATUS "rmacoll: MPI baseline mpi_alltoallv_perf enabled (${MPI_C_LIBRARIES})")
else()
  message(STATUS "rmacoll: MPI not found; mpi_alltoallv_perf not built")
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
endif()
