# test_threads: ranks as threads of one process, virtual nodes, real transports.
add_test(NAME test_threads COMMAND test_threads)
set_tests_properties(test_threads PROPERTIES
  TIMEOUT 600
  LABELS "integration"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
target_link_libraries(test_threads PRIVATE Threads::Threads)
