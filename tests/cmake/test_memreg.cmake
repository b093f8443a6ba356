# test_memreg: rmacoll_mem_register / deregister with host memory; ranks as
# processes, two virtual nodes (ce host inside a node, libfabric tcp on
# loopback between them). test_lru counts ofi's DEBUG eviction line, so it
# needs the ofi transport; without it the test is not built.
if(RMACOLL_ENABLE_OFI AND RMACOLL_ENABLE_CE)
  add_test(NAME test_memreg COMMAND test_memreg)
  set_tests_properties(test_memreg PROPERTIES
    TIMEOUT 600
    LABELS "integration;multiprocess"
    ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
else()
  set_target_properties(test_memreg PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
