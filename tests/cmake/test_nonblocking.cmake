# test_nonblocking: started calls overlapped with a second communicator's
# call; ranks as processes, virtual nodes, ofi over loopback.
add_test(NAME test_nonblocking COMMAND test_nonblocking)
set_tests_properties(test_nonblocking PROPERTIES
  TIMEOUT 900
  LABELS "integration;multiprocess"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
