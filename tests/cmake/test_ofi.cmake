# test_ofi: forks ranks over loopback libfabric providers; pinned to lo.
# Built without libfabric it exits 77 (skipped).
target_compile_definitions(test_ofi PRIVATE ${RMACOLL_DEFINES})
if(TARGET PkgConfig::LIBFABRIC)
  target_link_libraries(test_ofi PRIVATE PkgConfig::LIBFABRIC)  # provider_here
endif()
add_test(NAME test_ofi COMMAND test_ofi)
set_tests_properties(test_ofi PROPERTIES
  TIMEOUT 900
  SKIP_RETURN_CODE 77
  LABELS "ofi;multiprocess"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
