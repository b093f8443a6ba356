# test_e2e: ranks as processes, virtual nodes, real transports on loopback.
add_test(NAME test_e2e COMMAND test_e2e)
set_tests_properties(test_e2e PROPERTIES
  TIMEOUT 1800
  LABELS "integration;multiprocess;slow"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
