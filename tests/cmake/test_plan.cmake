# test_plan: the planner unit tests, plus smoke tests of the rmacoll-plan
# tool (tools/plan.c) on shared cases: a plan checked by the reference
# executor, valid JSON, and the mismatch case failing with the rank named.
add_test(NAME ${name} COMMAND ${name})
set_tests_properties(${name} PROPERTIES TIMEOUT 120)
if(TARGET rmacoll-plan)
  add_test(NAME plan_tool_check
    COMMAND rmacoll-plan --case ${RMACOLL_CASES_DIR}/uneven_nodes_3_2.txt
            --scheduler node_shift --relay-buffer 4K --slots 4 --check)
  set_tests_properties(plan_tool_check PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "check: ok \\(data, 2 calls")
  add_test(NAME plan_tool_json
    COMMAND rmacoll-plan --topology 2,3 --dist sparse:0.5 --count 7 --seed 5
            --json --rank 1)
  set_tests_properties(plan_tool_json PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^\\{\"case\":.*\"plans\":\\[\\{\"rank\":1,.*\"totals\":\\{\"rounds\":")
  # direct streams on five nodes (issue 30): the reference executor runs
  # three calls exact, and the CE bytes are the node-local and self copies
  # alone (91046784 B; 153320400 B with RMACOLL_RELAY_DIRECT_MIN_BYTES=0,
  # where the relays forward the same streams); eager_max_bytes as it was
  # when these figures were taken (1 MiB, the default until 2026-12-07)
  add_test(NAME plan_tool_check_direct_5_nodes
    COMMAND rmacoll-plan --topology 5x3 --count 70000 --dist zipf:1.2 --seed 7
            --check --calls 3)
  set_tests_properties(plan_tool_check_direct_5_nodes PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_RELAY_DIRECT_MIN_BYTES=1M;RMACOLL_EAGER_MAX_BYTES=1M"
    PASS_REGULAR_EXPRESSION "direct streams planned.*check: ok \\(virtual, 3 calls, 675 puts, 210 signals, proxy 98209872 B, ce 91046784 B\\)")
  add_test(NAME plan_tool_mismatch
    COMMAND rmacoll-plan --case ${RMACOLL_CASES_DIR}/mismatch_2x2.txt)
  set_tests_properties(plan_tool_mismatch PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "fails on every rank with RMACOLL_ERR_MISMATCH.*rank 0 found a count mismatch")
  add_test(NAME plan_tool_mismatch_status
    COMMAND rmacoll-plan --case ${RMACOLL_CASES_DIR}/mismatch_2x2.txt)
  set_tests_properties(plan_tool_mismatch_status PROPERTIES TIMEOUT 60 WILL_FAIL TRUE)
endif()
if(TARGET rmacoll-plan)
  # --rank plans one rank only: a 4096-rank topology answers at once.
  add_test(NAME plan_tool_rank_only
    COMMAND rmacoll-plan --topology 512x8 --count 16 --rank 4095 --json)
  set_tests_properties(plan_tool_rank_only PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^\\{\"case\":\"topology 512x8.*\"nranks\":4096,\"nnodes\":512,.*\"plans\":\\[\\{\"rank\":4095,")
  # planner micro-benchmark: 64 ranks, node_shift, uniform counts
  add_test(NAME plan_tool_bench
    COMMAND rmacoll-plan --topology 8x8 --scheduler node_shift --bench 3)
  set_tests_properties(plan_tool_bench PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "bench: rank 0 of 64 ranks on 8 nodes, scheduler node_shift: 190 tasks, 30 batches; [0-9.]+ us per build")
endif()
if(TARGET rmacoll-plan)
  # --sim over the documented model, every built-in scheduler, JSON
  add_test(NAME plan_tool_sim_all
    COMMAND rmacoll-plan --topology 4x4 --dist zipf:1.2 --count 4K --sim
            --scheduler all --model ${PROJECT_SOURCE_DIR}/docs/sim/fabric-h200-cx7.yaml --json)
  set_tests_properties(plan_tool_sim_all PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "\"model\":\\{\"name\":\"H200 \\+ ConnectX-7, rail-only\",\"nic_GBps\":48.5,.*\"scheduler\":\"largest_first\",\"status\":\"RMACOLL_SUCCESS\",\"makespan_us\":[0-9.]+,.*\"scheduler\":\"xor\"")
  # --rank takes a rank number only
  add_test(NAME plan_tool_rank_bad
    COMMAND rmacoll-plan --topology 2x2 --rank abc)
  set_tests_properties(plan_tool_rank_bad PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "rmacoll-plan: --rank: expected a rank \\(0 or more\\), got 'abc'")
  add_test(NAME plan_tool_rank_negative
    COMMAND rmacoll-plan --topology 2x2 --rank -1)
  set_tests_properties(plan_tool_rank_negative PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "rmacoll-plan: --rank: expected a rank \\(0 or more\\), got '-1'")
  # the eager path of two-node host calls is planned as the library plans
  # it (eager_max_bytes from the configuration: env here), and said so
  add_test(NAME plan_tool_eager_default
    COMMAND rmacoll-plan --topology 2x2 --count 16 --rank 0)
  set_tests_properties(plan_tool_eager_default PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "eager_max_bytes 131072 \\(eager path planned for host calls\\), node_eager_max_bytes 1048576 \\(node eager path planned for host calls\\), relay.direct_min_bytes 1048576 \\(direct streams planned for host calls, where every rank of a node shares one network interface\\)\n.*cePut +eager +-> 0 +NODE_EAGER\\+0 -> RECV\\+64 64 B origin 1\n +cePut +eager +-> 0 +EAGER\\+0 -> RECV\\+128 64 B origin 2"
    FAIL_REGULAR_EXPRESSION "to_relay")
  # uneven nodes: the one rank of node 1 relays for all 40 ranks of node 0,
  # so the eager threshold drops to 16 MiB / (4 x 40) (multiple of 64),
  # and the node payloads to 32 MiB / 40 (the largest node)
  add_test(NAME plan_tool_eager_budget
    COMMAND rmacoll-plan --topology 40,1 --count 1 --rank 40)
  set_tests_properties(plan_tool_eager_budget PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "eager_max_bytes 104832 \\(eager path planned for host calls\\), node_eager_max_bytes 838848 \\(node eager path planned for host calls\\)")
  add_test(NAME plan_tool_eager_off
    COMMAND ${CMAKE_COMMAND} -E env RMACOLL_EAGER_MAX_BYTES=0 RMACOLL_NODE_EAGER_MAX_BYTES=0
            $<TARGET_FILE:rmacoll-plan> --topology 2x2 --count 16 --rank 0 --json)
  set_tests_properties(plan_tool_eager_off PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "\"eager_max_bytes\":0,\"eager\":false,\"node_eager_max_bytes\":0,\"node_eager\":false,\"direct_min_bytes\":1048576,\"direct\":true}.*\"kind\": ?\"to_relay\""
    FAIL_REGULAR_EXPRESSION "\"kind\": ?\"eager\"")
  # with the relay off the records carry each receiver's own block: the
  # reference executor checks every byte of the plan
  add_test(NAME plan_tool_eager_relay_off
    COMMAND rmacoll-plan --case ${PROJECT_SOURCE_DIR}/tests/cases/symmetric_small_2x2.txt
            --check --relay off)
  set_tests_properties(plan_tool_eager_relay_off PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "check: ok"
    FAIL_REGULAR_EXPRESSION "FAILED")
  # relay off at 1 KiB on uneven nodes: some blocks eager, some put (18 of
  # the 24 signals of the all-direct plan remain), every byte checked
  add_test(NAME plan_tool_eager_relay_off_mixed
    COMMAND ${CMAKE_COMMAND} -E env RMACOLL_EAGER_MAX_BYTES=1K
            $<TARGET_FILE:rmacoll-plan> --case ${PROJECT_SOURCE_DIR}/tests/cases/uneven_nodes_3_2.txt
            --check --relay off)
  set_tests_properties(plan_tool_eager_relay_off_mixed PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "check: ok \\(data, 2 calls, 50 puts, 18 signals, proxy 43192 B, ce 54072 B\\)"
    FAIL_REGULAR_EXPRESSION "FAILED")
  # relay off: each record to a rank of the other node carries that rank's
  # block alone, and the receiver copies it out of its own inbox
  add_test(NAME plan_tool_eager_relay_off_plan
    COMMAND rmacoll-plan --topology 2x2 --count 16 --rank 0 --relay off)
  set_tests_properties(plan_tool_eager_relay_off_plan PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "relay off [^\n]*eager_max_bytes 131072 \\(eager path planned for host calls\\)[^\n]*\n.*cePut +eager +-> 0 +EAGER\\+0 -> RECV\\+128 64 B origin 2\n +cePut +eager +-> 0 +EAGER\\+0 -> RECV\\+192 64 B origin 3"
    FAIL_REGULAR_EXPRESSION "proxyPut")
  # direct streams (relay.direct_min_bytes): a stream to the other node of
  # at least that many bytes goes straight to its receivers, the one to the
  # relay raising DATA(0) (word 0), the other XDATA(0) (word 4 + 2 + 0);
  # rank 0 waits for both senders there itself (DATA(2), XDATA(3))
  add_test(NAME plan_tool_direct_plan
    COMMAND ${CMAKE_COMMAND} -E env RMACOLL_RELAY_DIRECT_MIN_BYTES=64 RMACOLL_EAGER_MAX_BYTES=0
            $<TARGET_FILE:rmacoll-plan> --topology 2x2 --count 16 --rank 0)
  set_tests_properties(plan_tool_direct_plan PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "relay.direct_min_bytes 64 \\(direct streams planned for host calls[^\n]*\n.*proxyPut +direct +-> 2 +SEND\\+128 -> RECV\\+0 64 B sig\\[0\\]=1\n.*proxyPut +direct +-> 3 +SEND\\+192 -> RECV\\+0 64 B sig\\[6\\]=1\n.*proxyWait data +<- 2 +sig\\[2\\]>=1 origin 2\n +proxyWait data +<- 3 +sig\\[9\\]>=1 origin 3"
    FAIL_REGULAR_EXPRESSION "to_relay|forward")
  # eager, relayed and direct streams in one plan on uneven nodes (streams
  # to the other node: rank 0 2564 B eager, ranks 1 and 2 4816 and 3188 B
  # relayed, ranks 3 and 4 8032 and 5004 B direct): the reference executor
  # checks every byte and signal over two calls (58 puts, 28 signals;
  # with direct streams off 70 and 36)
  add_test(NAME plan_tool_direct_mixed
    COMMAND ${CMAKE_COMMAND} -E env RMACOLL_RELAY_DIRECT_MIN_BYTES=5000
            RMACOLL_EAGER_MAX_BYTES=2600
            $<TARGET_FILE:rmacoll-plan> --case ${PROJECT_SOURCE_DIR}/tests/cases/uneven_nodes_3_2.txt
            --check)
  set_tests_properties(plan_tool_direct_mixed PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "check: ok \\(data, 2 calls, 58 puts, 28 signals, proxy 42080 B, ce 63056 B\\)"
    FAIL_REGULAR_EXPRESSION "FAILED")
  # the --sim header names the topology's relay minimum, as the plan
  # header does (8 slots here: 64 bytes)
  add_test(NAME plan_tool_sim_relay_minimum
    COMMAND rmacoll-plan --topology 2x4 --sim --slots 8)
  set_tests_properties(plan_tool_sim_relay_minimum PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^# topology 2x4 [^\n]*relay on \\(67108864 B, 8 slots; minimum relay.buffer_bytes 64\\)\n")
  # a bad model file is refused naming the key
  add_test(NAME plan_tool_sim_bad_model
    COMMAND rmacoll-plan --topology 2x2 --model ${PROJECT_SOURCE_DIR}/tests/cases/README.md)
  set_tests_properties(plan_tool_sim_bad_model PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "rmacoll-plan: --model: ")
endif()
if(TARGET rmacoll-plan)
  # RMACOLL_* variables change the plan as they change the library's (the
  # same configuration loading); an option wins over its variable.
  add_test(NAME plan_tool_env
    COMMAND rmacoll-plan --topology 2,2 --rank 0)
  set_tests_properties(plan_tool_env PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_SCHEDULER=xor;RMACOLL_RELAY_SLOTS=2;RMACOLL_RELAY_BUFFER_BYTES=1M"
    PASS_REGULAR_EXPRESSION "^# topology 2,2 [^\n]*: 4 ranks on 2 nodes, float32; scheduler xor, relay on \\(1048576 B, 2 slots; minimum relay.buffer_bytes 16\\),")
  add_test(NAME plan_tool_env_option_wins
    COMMAND rmacoll-plan --topology 2,2 --rank 0 --scheduler shift --slots 8)
  set_tests_properties(plan_tool_env_option_wins PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_SCHEDULER=xor;RMACOLL_RELAY_SLOTS=2"
    PASS_REGULAR_EXPRESSION "; scheduler shift, relay on \\(67108864 B, 8 slots; minimum relay.buffer_bytes 64\\),")
  add_test(NAME plan_tool_env_bad
    COMMAND rmacoll-plan --topology 2,2 --rank 0)
  set_tests_properties(plan_tool_env_bad PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_RELAY_SLOTS=abc"
    PASS_REGULAR_EXPRESSION "^rmacoll-plan: environment RMACOLL_RELAY_SLOTS='abc' \\(relay.slots\\): 'abc' is not an unsigned integer\n$")
  # The relay slot rule of the library (rmacoll__plan_relay_rule), before
  # anything is planned: 1,4 with 4 slots needs 128 bytes.
  add_test(NAME plan_tool_relay_minimum
    COMMAND rmacoll-plan --topology 1,4 --relay-buffer 120)
  set_tests_properties(plan_tool_relay_minimum PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^rmacoll-plan: topology 1,4 [^\n]*: relay.buffer_bytes = 120 is too small for this topology: rank 0 relays for 4 senders with 4 slots each, leaving 0-byte slots \\(at least 8 needed: relay.buffer_bytes >= 128\\)")
  add_test(NAME plan_tool_relay_minimum_status
    COMMAND rmacoll-plan --topology 1,4 --relay-buffer 120)
  set_tests_properties(plan_tool_relay_minimum_status PROPERTIES TIMEOUT 60 WILL_FAIL TRUE)
  add_test(NAME plan_tool_relay_minimum_ok
    COMMAND rmacoll-plan --topology 1,4 --relay-buffer 128 --count 3 --check)
  set_tests_properties(plan_tool_relay_minimum_ok PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "minimum relay.buffer_bytes 128\\).*check: ok")
endif()
# --heat's SVG against the simulation it draws (tests/tools/check_heat_svg.py):
# viewBox and every label inside it, ticks at column centres from round 0 to
# the last round, the colour scale from 0 B to the largest cell. One column
# per round (4x4), grouped rounds (32x8: over 240 rounds), one node (no NIC
# bytes), one traced rank, and a case whose title is wider than the cells.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(TARGET rmacoll-plan AND Python3_Interpreter_FOUND)
  set(_heat_check ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/tools/check_heat_svg.py
    $<TARGET_FILE:rmacoll-plan>)
  foreach(_h "4x4;--;--topology;4x4;--dist;zipf:1.2;--count;4K"
             "grouped;--;--topology;32x8;--dist;zipf:1.2;--count;4K"
             "one_node;--;--topology;1x4"
             "one_traced;--;--topology;2,3;--trace-ranks;1"
             "long_title;--long-title;--;--case;${RMACOLL_CASES_DIR}/moe_zipf_2x4.txt")
    list(GET _h 0 _n)
    list(REMOVE_AT _h 0)
    add_test(NAME plan_tool_heat_svg_${_n} COMMAND ${_heat_check} ${_h})
    set_tests_properties(plan_tool_heat_svg_${_n} PROPERTIES TIMEOUT 120
      PASS_REGULAR_EXPRESSION "heat svg ok: ")
  endforeach()
endif()
