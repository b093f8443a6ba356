# test_safety: bad input and faults (issue 10); ranks as processes, virtual
# nodes, ce host inside a node and libfabric tcp on loopback between nodes.
# Serial: its timeouts are short (0.5-1 s) and measure silence, which a
# loaded machine can fake.
add_test(NAME test_safety COMMAND test_safety)
set_tests_properties(test_safety PROPERTIES
  TIMEOUT 900
  RUN_SERIAL TRUE
  LABELS "integration;multiprocess"
  ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
# item 9: rmacoll-info --topology prints the topology's minimum relay buffer
# (8 * slots * most channels of a relay: 4 channels into the one-rank node
# of 1,4) and exits 1 when the loaded one is smaller.
if(TARGET rmacoll-info)
  add_test(NAME rmacoll_info_relay_min COMMAND rmacoll-info --topology 1,4)
  set_tests_properties(rmacoll_info_relay_min PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_CONFIG=;RMACOLL_RELAY_SLOTS=4;RMACOLL_RELAY_BUFFER_BYTES=128"
    PASS_REGULAR_EXPRESSION "rank 0 \\(node 0\\): 4 incoming channels, slots of 8 bytes.*minimum relay.buffer_bytes: 128 bytes")
  add_test(NAME rmacoll_info_relay_min_uneven COMMAND rmacoll-info --topology 3,2)
  set_tests_properties(rmacoll_info_relay_min_uneven PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_CONFIG=;RMACOLL_RELAY_SLOTS=2"
    PASS_REGULAR_EXPRESSION "minimum relay.buffer_bytes: 32 bytes \\(8-byte slots x relay.slots 2 x 2 channels at rank 3\\)")
  # NxG, as rmacoll-plan takes it: 2 nodes of 2, two channels per relay
  add_test(NAME rmacoll_info_relay_min_nxg COMMAND rmacoll-info --topology 2x2)
  set_tests_properties(rmacoll_info_relay_min_nxg PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_CONFIG=;RMACOLL_RELAY_SLOTS=2"
    PASS_REGULAR_EXPRESSION "topology 2x2: 4 ranks on 2 nodes")
  # --json with --topology: the same figures as one JSON object (it printed
  # the text before), parsed and checked field by field
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    add_test(NAME rmacoll_info_relay_json COMMAND sh -c
      "\"$1\" --json --topology 1,4 | \"$2\" -c 'import json,sys; d=json.load(sys.stdin); r=d[\"relays\"]; assert (d[\"nranks\"], d[\"nnodes\"], d[\"relay\"], d[\"relay_slots\"], d[\"relay_buffer_bytes\"], d[\"min_relay_buffer_bytes\"], d[\"min_at_rank\"], d[\"buffer_too_small\"]) == (5, 2, True, 4, 128, 128, 0, False), d; assert r[0] == {\"rank\": 0, \"node\": 0, \"channels\": 4, \"slot_bytes\": 8}, r; print(\"info json ok\", len(r))'"
      sh $<TARGET_FILE:rmacoll-info> ${Python3_EXECUTABLE})
    set_tests_properties(rmacoll_info_relay_json PROPERTIES TIMEOUT 60
      ENVIRONMENT "RMACOLL_CONFIG=;RMACOLL_RELAY_SLOTS=4;RMACOLL_RELAY_BUFFER_BYTES=128"
      PASS_REGULAR_EXPRESSION "info json ok 2")
  endif()
  add_test(NAME rmacoll_info_relay_too_small COMMAND rmacoll-info --topology 1,4)
  set_tests_properties(rmacoll_info_relay_too_small PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_CONFIG=;RMACOLL_RELAY_SLOTS=4;RMACOLL_RELAY_BUFFER_BYTES=120"
    WILL_FAIL TRUE)
endif()
