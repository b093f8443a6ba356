# test_e2e: ranks as processes, virtual nodes, real transports on loopback.
add_test(NAME test_e2e COMMAND test_e2e)
set_tests_properties(test_e2e PROPERTIES
  TIMEOUT 1800
  LABELS "integration;multiprocess;slow"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
# the configuration agreement names the key that differs, on every rank
add_test(NAME test_e2e_config_differs COMMAND test_e2e)
set_tests_properties(test_e2e_config_differs PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo;RMACOLL_TEST_FILTER=test_config_differs"
  PASS_REGULAR_EXPRESSION "rank 1: the configuration differs between ranks: key eager_max_bytes is 64KiB here and differs on rank 0"
  FAIL_REGULAR_EXPRESSION "FAILED")
# a bad environment value on one rank fails every rank at once, naming it
add_test(NAME test_e2e_config_bad_env COMMAND test_e2e)
set_tests_properties(test_e2e_config_bad_env PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo;RMACOLL_TEST_FILTER=test_config_bad_env_one_rank"
  PASS_REGULAR_EXPRESSION "rank 0: the configuration of rank 1 is invalid: environment RMACOLL_EAGER_MAX_BYTES='lots' \\(eager_max_bytes\\): 'lots' is not a size"
  FAIL_REGULAR_EXPRESSION "FAILED")
