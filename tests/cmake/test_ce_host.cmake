# tests/cmake/test_ce_host.cmake - the ce host backend test forks 2..4 rank
# processes and needs the ce transport in the library.
if(RMACOLL_ENABLE_CE)
  add_test(NAME test_ce_host COMMAND test_ce_host)
  set_tests_properties(test_ce_host PROPERTIES TIMEOUT 600 LABELS "ce;multiprocess")
else()
  set_target_properties(test_ce_host PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
