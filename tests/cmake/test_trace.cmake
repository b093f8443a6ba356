# test_trace: the NVTX ranges of the public calls, seen by a minimal NVTX
# tool (tests/plugins/nvtx_record.c) that the library's NVTX loader injects
# from NVTX_INJECTION64_PATH. Skipped (77) in a build without nvtx3.
if(RMACOLL_HAVE_NVTX)
  add_library(nvtx_record MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/nvtx_record.c)
  target_include_directories(nvtx_record PRIVATE ${RMACOLL_NVTX3_INCLUDE})
  target_link_libraries(nvtx_record PRIVATE Threads::Threads)
  target_compile_definitions(${name} PRIVATE
    RMACOLL_TEST_NVTX_TOOL="$<TARGET_FILE:nvtx_record>")
  add_dependencies(${name} nvtx_record)
endif()
target_link_libraries(${name} PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME ${name} COMMAND ${name})
set_tests_properties(${name} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
