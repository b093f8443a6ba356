# test_devcounts: the host side of device-count calls, ranks as threads,
# one node and two virtual nodes (libfabric over loopback between them).
add_test(NAME test_devcounts COMMAND test_devcounts)
set_tests_properties(test_devcounts PROPERTIES
  TIMEOUT 300
  LABELS "integration"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
target_link_libraries(test_devcounts PRIVATE Threads::Threads)
