# test_shrink: rmacoll_comm_shrink (issue 33 item 4); ranks as processes on
# virtual nodes, ce host inside a node and libfabric tcp on loopback
# between nodes. Serial: heartbeat periods of 500 ms measure silence, which
# a loaded machine can fake.
add_test(NAME test_shrink COMMAND test_shrink)
set_tests_properties(test_shrink PROPERTIES
  TIMEOUT 900
  RUN_SERIAL TRUE
  LABELS "integration;multiprocess"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
