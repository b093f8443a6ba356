# test_safety: bad input and faults (issue 10); ranks as processes, virtual
# nodes, ce host inside a node and libfabric tcp on loopback between nodes.
add_test(NAME test_safety COMMAND test_safety)
set_tests_properties(test_safety PROPERTIES
  TIMEOUT 900
  LABELS "integration;multiprocess"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
