# test_emunic: the emulated-NIC plugin (plugins/emunic, built against the
# public headers only) carries the network path of the end-to-end cases
# (host memory). Without the plugin target (RMACOLL_BUILD_EMUNIC off) the
# test is not built.
if(TARGET rmacoll_emunic)
  target_compile_definitions(${name} PRIVATE
    RMACOLL_TEST_EMUNIC_PLUGIN="$<TARGET_FILE:rmacoll_emunic>")
  add_dependencies(${name} rmacoll_emunic)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 900
    LABELS "integration;multiprocess;plugin" ENVIRONMENT "RMACOLL_EMUNIC_NO_CUDA=1")
else()
  set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
