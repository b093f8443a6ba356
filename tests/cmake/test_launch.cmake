# test_launch: rmacoll-perf's ranks die with their launcher.
add_test(NAME test_launch COMMAND test_launch)
set_tests_properties(test_launch PROPERTIES
  TIMEOUT 120
  LABELS "multiprocess"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
add_dependencies(test_launch rmacoll-perf)
