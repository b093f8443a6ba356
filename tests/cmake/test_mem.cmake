# test_mem: rmacoll_mem_alloc / rmacoll_mem_free; ranks as processes,
# virtual nodes, ce host inside a node and libfabric tcp on loopback
# between nodes. Needs the ce transport (node peers copy into allocations).
#
# RMACOLL_TEST_EXPECT_DIRECT=ON (default) also asserts what only the ce
# transport's direct-copy path shows (test_direct_path: its DEBUG "maps ...
# for direct copies" line, shared memory for the first allocation, fallback
# beyond the 256 slots); OFF skips that test function, for kernels without
# pidfd_getfd (Linux < 5.6). Every other assertion holds with either path.
option(RMACOLL_TEST_EXPECT_DIRECT
  "test_mem: assert the ce transport's direct copies into rmacoll_mem_alloc memory" ON)
if(RMACOLL_ENABLE_CE)
  if(RMACOLL_TEST_EXPECT_DIRECT)
    set(_mem_direct 1)
  else()
    set(_mem_direct 0)
  endif()
  add_test(NAME test_mem COMMAND test_mem)
  set_tests_properties(test_mem PROPERTIES
    TIMEOUT 600
    LABELS "integration;multiprocess;ce"
    ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo;RMACOLL_TEST_EXPECT_DIRECT=${_mem_direct}")
else()
  set_target_properties(test_mem PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
