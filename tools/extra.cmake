# tools/extra.cmake - included by tools/CMakeLists.txt after the tools:
# CUDA memory and the NCCL baseline of rmacoll-perf (when the CUDA toolkit
# / NCCL are found), the MPI_Alltoallv baseline (when MPI is found) and
# smoke tests of rmacoll-perf's option parsing.

# rmacoll-perf --buffers cuda: the CUDA runtime (never libcuda) in the tool
# only. --baseline nccl: libnccl too. Both optional; without them the
# options fail with a clear message at run time.
if(TARGET rmacoll-perf AND RMACOLL_HAVE_CUDA AND TARGET CUDA::cudart)
  target_link_libraries(rmacoll-perf PRIVATE CUDA::cudart)
  target_compile_definitions(rmacoll-perf PRIVATE RMACOLL_PERF_HAVE_CUDA=1)
  # Same search as cmake/nccl.cmake (cache variables are shared).
  if(RMACOLL_ENABLE_NCCL)
    find_path(NCCL_INCLUDE_DIR nccl.h
      HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_INCLUDE_DIRS}
      PATHS /usr/local/cuda /usr PATH_SUFFIXES include)
    find_library(NCCL_LIB nccl
      HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_DIR}
      PATHS /usr/local/cuda/lib64 /usr/local/cuda /usr
      PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  endif()
  if(RMACOLL_ENABLE_NCCL AND NCCL_INCLUDE_DIR AND NCCL_LIB)
    target_include_directories(rmacoll-perf PRIVATE ${NCCL_INCLUDE_DIR})
    target_link_libraries(rmacoll-perf PRIVATE ${NCCL_LIB})
    target_compile_definitions(rmacoll-perf PRIVATE RMACOLL_PERF_HAVE_NCCL=1)
    message(STATUS "rmacoll: rmacoll-perf --buffers cuda and --baseline nccl enabled (${NCCL_LIB})")
  else()
    message(STATUS "rmacoll: rmacoll-perf --buffers cuda enabled; NCCL not found, no --baseline nccl")
  endif()
  # --gemm (SM interference): cuBLAS in rmacoll-perf only, when the toolkit
  # has it; without it the option fails with a clear message at run time.
  if(TARGET CUDA::cublas)
    target_link_libraries(rmacoll-perf PRIVATE CUDA::cublas)
    target_compile_definitions(rmacoll-perf PRIVATE RMACOLL_PERF_HAVE_CUBLAS=1)
    message(STATUS "rmacoll: rmacoll-perf --gemm enabled (cuBLAS)")
  else()
    message(STATUS "rmacoll: cuBLAS not found; rmacoll-perf --gemm disabled")
  endif()
endif()

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  # Installed as rmacoll-mpi-perf (an rmacoll- name in bin/); the build
  # tree keeps mpi_alltoallv_perf too (a link) for existing scripts.
  add_executable(rmacoll-mpi-perf ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_alltoallv_perf.c)
  # Same counts, fill, check and columns as rmacoll-perf: tools/common.
  target_link_libraries(rmacoll-mpi-perf PRIVATE rmacoll_toolsupport rmacoll_static MPI::MPI_C)
  target_include_directories(rmacoll-mpi-perf PRIVATE ${PROJECT_SOURCE_DIR})
  add_custom_command(TARGET rmacoll-mpi-perf POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E create_symlink rmacoll-mpi-perf mpi_alltoallv_perf
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  install(TARGETS rmacoll-mpi-perf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  message(STATUS "rmacoll: MPI baseline rmacoll-mpi-perf enabled (${MPI_C_LIBRARIES})")
else()
  message(STATUS "rmacoll: MPI not found; rmacoll-mpi-perf not built")
endif()

# include(CTest) / enable_testing() run after tools/ in the top-level
# CMakeLists, so on a first configure BUILD_TESTING is not defined yet and
# add_test here would be ignored: follow RMACOLL_BUILD_TESTS then (and
# BUILD_TESTING once it exists), and enable testing in this directory.
if(RMACOLL_BUILD_TESTS AND (NOT DEFINED BUILD_TESTING OR BUILD_TESTING)
   AND TARGET rmacoll-perf)
  enable_testing()
  add_test(NAME perf_help COMMAND rmacoll-perf --help)
  set_tests_properties(perf_help PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "usage: .*--dist")
  # --help's --scheduler line is made from the scheduler registry: every
  # scheduler rmacoll-info lists as compiled in must be in it (largest_first
  # was missing from the hard-coded text).
  if(TARGET rmacoll-info)
    add_test(NAME perf_help_schedulers COMMAND sh -c
      "names=$(\"$1\" | awk '/^schedulers compiled in:/{f=1;next} f&&/^  [a-z_]/{print $1;next} f{exit}'); test -n \"$names\" || { echo 'rmacoll-info listed no scheduler'; exit 3; }; line=$(\"$2\" --help | grep -e '--scheduler NAME'); echo \"$line\"; n=0; for s in $names; do n=$((n+1)); echo \"$line\" | grep -qw -e \"$s\" || { echo \"--help lacks scheduler $s\"; exit 1; }; done; echo \"all $n schedulers in --help\""
      sh $<TARGET_FILE:rmacoll-info> $<TARGET_FILE:rmacoll-perf>)
    set_tests_properties(perf_help_schedulers PROPERTIES TIMEOUT 30
      PASS_REGULAR_EXPRESSION "all [0-9]+ schedulers in --help")
  endif()
  # A bad option must fail (exit 2), not start ranks.
  add_test(NAME perf_bad_option COMMAND rmacoll-perf --no-such-option)
  set_tests_properties(perf_bad_option PROPERTIES TIMEOUT 30 WILL_FAIL TRUE)
  # --baseline nccl without --buffers cuda is refused before anything starts.
  add_test(NAME perf_baseline_needs_cuda COMMAND rmacoll-perf --baseline nccl)
  set_tests_properties(perf_baseline_needs_cuda PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--baseline nccl needs --buffers cuda")
  # --gemm without --buffers cuda, and a bad --gemm, are refused up front.
  add_test(NAME perf_gemm_needs_cuda COMMAND rmacoll-perf --gemm 1024)
  set_tests_properties(perf_gemm_needs_cuda PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--gemm needs --buffers cuda")
  add_test(NAME perf_gemm_bad_size COMMAND rmacoll-perf --buffers cuda --gemm 0)
  set_tests_properties(perf_gemm_bad_size PROPERTIES TIMEOUT 30 WILL_FAIL TRUE)
  add_test(NAME perf_help_gemm COMMAND rmacoll-perf --help)
  set_tests_properties(perf_help_gemm PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--gemm N.*--gemm-iters K")
  add_test(NAME perf_help_gpu COMMAND rmacoll-perf --help)
  set_tests_properties(perf_help_gpu PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--buffers host\\|cuda.*--memory host\\|cuda is the old name.*--baseline none\\|nccl")
  # --json FILE in a folder that does not exist: refused before any rank
  # starts (exit 64), naming the path; nothing is written.
  add_test(NAME perf_json_bad_path
    COMMAND rmacoll-perf --json ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/x.json -b 1K -e 1K -n 1 -w 0)
  set_tests_properties(perf_json_bad_path PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "^rmacoll-perf: --json [^ ]*/no-such-dir/x.json: cannot create the file in [^ ]*/no-such-dir: No such file or directory\n$")
  add_test(NAME perf_json_bad_path_status
    COMMAND rmacoll-perf --json ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/x.json -b 1K -e 1K -n 1 -w 0)
  set_tests_properties(perf_json_bad_path_status PROPERTIES TIMEOUT 30 WILL_FAIL TRUE)

  # The check can fail: RMACOLL_PERF_TEST_CORRUPT=1 flips the first byte
  # rank 1 receives before each check. Default (-c 1): the one checked
  # iteration after the timed ones fails in each of 2 rows (#wrong 1 each);
  # --check-every: each of the 3 timed iterations of both rows fails. The
  # exit status is 2 in both.
  add_test(NAME perf_check_fails COMMAND sh -c
    "RMACOLL_PERF_TEST_CORRUPT=1 \"$1\" -np 4 --ppn 2 -b 1K -e 8K -f 8 -n 3 -w 1 2>&1; echo \"exit $?\""
    sh $<TARGET_FILE:rmacoll-perf>)
  set_tests_properties(perf_check_fails PROPERTIES TIMEOUT 120
    ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo" LABELS "multiprocess"
    PASS_REGULAR_EXPRESSION "rank 1: rmacoll: 1 wrong in checked iteration 0: rank 1: element 0 from rank [0-9]+ is .*1024 +256 +float +none +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +1 .*8192 +2048 +float +none +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +1 .*Out of bounds values : 2 FAILED.*rmacoll-perf: data check failed \\(wrong values above\\).*exit 2")
  add_test(NAME perf_check_every_fails COMMAND sh -c
    "RMACOLL_PERF_TEST_CORRUPT=1 \"$1\" -np 4 --ppn 2 -b 1K -e 8K -f 8 -n 3 -w 1 --check-every 2>&1; echo \"exit $?\""
    sh $<TARGET_FILE:rmacoll-perf>)
  set_tests_properties(perf_check_every_fails PROPERTIES TIMEOUT 120
    ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo" LABELS "multiprocess"
    PASS_REGULAR_EXPRESSION "check every timed iteration.*rank 1: rmacoll: 1 wrong in timed iteration 0: .*Out of bounds values : 6 FAILED.*exit 2")
  # -R 1 (nccl-tests' --local_register): the host send and receive buffers
  # come from rmacoll_mem_alloc (and go back through rmacoll_mem_free: a
  # buffer left at destroy is logged as not freed, a foreign pointer is an
  # error of rmacoll_mem_free); all 3 rows check clean, and with the byte
  # flipped (in such a buffer) the check fails in both rows (exit 2).
  # -R 1 with --buffers cuda is refused before any rank starts (exit 64).
  add_test(NAME perf_local_register
    COMMAND rmacoll-perf -np 4 --ppn 2 -b 1K -e 64K -f 8 -n 5 -w 1 -R 1)
  set_tests_properties(perf_local_register PROPERTIES TIMEOUT 120
    ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo" LABELS "multiprocess"
    FAIL_REGULAR_EXPRESSION "not freed|rmacoll_mem_free|rmacoll_mem_alloc:"
    PASS_REGULAR_EXPRESSION "# memory host, local_register 1 \\(rmacoll_mem_alloc\\), timing host clock.*\n +1024 +256 +float +none +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 .*\n +8192 +2048 +float +none +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 .*\n +65536 +16384 +float +none +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 .*Out of bounds values : 0 OK")
  add_test(NAME perf_local_register_check_fails COMMAND sh -c
    "RMACOLL_PERF_TEST_CORRUPT=1 \"$1\" -np 4 --ppn 2 -b 1K -e 8K -f 8 -n 3 -w 1 -R 1 2>&1; echo \"exit $?\""
    sh $<TARGET_FILE:rmacoll-perf>)
  set_tests_properties(perf_local_register_check_fails PROPERTIES TIMEOUT 120
    ENVIRONMENT "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo" LABELS "multiprocess"
    PASS_REGULAR_EXPRESSION "local_register 1 \\(rmacoll_mem_alloc\\).*\n +1024 +256 +float +none +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +1 .*\n +8192 +2048 +float +none +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +1 .*Out of bounds values : 2 FAILED.*exit 2")
  add_test(NAME perf_local_register_needs_host COMMAND sh -c
    "\"$1\" -R 1 --buffers cuda 2>&1; echo \"exit $?\"" sh $<TARGET_FILE:rmacoll-perf>)
  set_tests_properties(perf_local_register_needs_host PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "^rmacoll-perf: -R 1: registered buffers are host memory; --buffers cuda allocates its own device buffers: use -R 0 with it\nexit 64\n$")

  # nccl-tests command lines (issue 34 item 5): a pasted alltoall_perf line
  # with every nccl-tests flag rmacoll-perf takes (short forms here, long
  # forms below) runs unchanged, with -J; its text and its JSON document are
  # in nccl-tests' format, checked by tests/tools/nccl_tests_format.py
  # (written from nccl-tests' printed format, not from rmacoll-perf): the
  # in-place variant blank in the text (nccl-tests' 32-space not-measured
  # filler) and null in the JSON, the JSON rows the text's rows. -e kept
  # small for the suite.
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_perf_env "FI_TCP_IFACE=lo;FI_SOCKETS_IFACE=lo")
  set(_fmt ${PROJECT_SOURCE_DIR}/tests/tools/nccl_tests_format.py)
  if(Python3_Interpreter_FOUND)
    add_test(NAME perf_nccl_tests_cmdline COMMAND sh -c
      "d=$(mktemp -d) || exit 3; \"$1\" -b 8 -e 64K -f 2 -g 1 -t 1 -c 1 -n 5 -w 2 -o sum -r 0 -z 0 -a 1 -m 1 -N 1 -T 300 -d float -p 0 -y 0 -G 0 -C 0 -S 0 -R 0 -M 0 -D 0 -V 16 -u 0 -J \"$d/r.json\" >\"$d/out\"; echo \"perf rc=$?\"; \"$2\" \"$3\" --min-rows 14 --ranks 4 --expect-in-place none --json \"$d/r.json\" <\"$d/out\"; rc=$?; rm -rf \"$d\"; exit $rc"
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE} ${_fmt})
    set_tests_properties(perf_nccl_tests_cmdline PROPERTIES TIMEOUT 300
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "perf rc=0\nnccl_tests_format: ok: text and JSON, 14 rows \\(8\\.\\.65536 bytes\\), 4 ranks, validation 1")
    # The long forms (nccl-tests' option table), with -c 0 (#wrong N/A,
    # "nwrong": null), -C 1 (cputime columns, "cpu_time"), -S 1 (a
    # timestamp column), -i (config "step_bytes"), --dist uniform (every
    # rank moves the row's size: algbw = size / time, as nccl-tests).
    add_test(NAME perf_nccl_tests_longopts COMMAND sh -c
      "d=$(mktemp -d) || exit 3; \"$1\" -np 2 --ppn 1 --dist uniform --nthreads 1 --ngpus 1 --minbytes 1K --maxbytes 4K --stepbytes 1K --iters 3 --warmup_iters 1 --agg_iters 1 --run_cycles 1 --parallel_init 0 --check 0 --op sum --datatype int32 --root 0 --blocking 0 --stream_null 0 --timeout 120 --cudagraph 0 --report_cputime 1 --report_timestamps 1 --average 2 --local_register 0 --memory 0 --memory_report 0 --device_implementation 0 --device_cta_count 8 --unalign 0 --output_file \"$d/r.json\" >\"$d/out\"; echo \"perf rc=$?\"; \"$2\" \"$3\" --ranks 2 --min-rows 4 --expect-in-place none --algbw-size --json \"$d/r.json\" <\"$d/out\"; rc=$?; \"$2\" -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d[\"config\"]; r=d[\"results\"]; assert c[\"step_bytes\"]==1024 and \"step_factor\" not in c and c[\"validation\"]==0, c; assert all(x[\"out_of_place\"][\"nwrong\"] is None and \"cpu_time\" in x[\"out_of_place\"] and x[\"type\"]==\"int32\" for x in r), r; assert d[\"rmacoll\"][\"average\"]==\"min\"; print(\"longopts json ok\")' \"$d/r.json\" || rc=1; rm -rf \"$d\"; exit $rc"
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE} ${_fmt})
    set_tests_properties(perf_nccl_tests_longopts PROPERTIES TIMEOUT 300
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "perf rc=0\nnccl_tests_format: ok: text and JSON, 4 rows \\(1024\\.\\.4096 bytes\\), 2 ranks, validation 0[^\n]*\nlongopts json ok")
    # -J never overwrites (nccl-tests): an existing FILE is kept, FILE.0 is
    # written, and the text names it.
    add_test(NAME perf_nccl_json_no_overwrite COMMAND sh -c
      "d=$(mktemp -d) || exit 3; echo keep >\"$d/r.json\"; \"$1\" -np 2 --ppn 1 -b 1K -e 2K -f 2 -n 2 -w 1 -J \"$d/r.json\" >\"$d/out\"; echo \"perf rc=$?\"; grep \"^# Writing JSON output to $d/r.json.0$\" \"$d/out\" >/dev/null && echo named; test \"$(cat \"$d/r.json\")\" = keep && echo kept; \"$2\" \"$3\" --ranks 2 --json \"$d/r.json\" <\"$d/out\"; rm -rf \"$d\""
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE} ${_fmt})
    set_tests_properties(perf_nccl_json_no_overwrite PROPERTIES TIMEOUT 120
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "perf rc=0\nnamed\nkept\nnccl_tests_format: ok: text and JSON, 2 rows")
    # --in-place na: the in-place columns N/A (13 fields), for parsers that
    # index the out-of-place columns from the end of the row (SuperBench's
    # nccl-bw: tests/tools/parse_nccl_tests.py); the default's blank filler
    # is refused by that rule (the test fails without --in-place na).
    add_test(NAME perf_superbench_in_place_na COMMAND sh -c
      "\"$1\" -b 8 -e 64K -f 2 -n 5 -w 2 --in-place na | \"$2\" \"$3\" --min-rows 14 --ranks 4; \"$1\" -b 8 -e 64 -f 2 -n 2 -w 1 | \"$2\" \"$3\""
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE}
      ${PROJECT_SOURCE_DIR}/tests/tools/parse_nccl_tests.py)
    set_tests_properties(perf_superbench_in_place_na PROPERTIES TIMEOUT 300
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "parse_nccl_tests: ok: 14 rows \\(8\\.\\.65536 bytes\\), 4 ranks.*parse_nccl_tests: FAIL: row has 9 fields, header 13")
    # The checker can fail: the output before issue 34 (in-place N/A, which
    # --in-place na still prints) is not nccl-tests' format.
    add_test(NAME perf_nccl_format_rejects_na COMMAND sh -c
      "\"$1\" -np 2 --ppn 1 -b 1K -e 1K -n 2 -w 1 --in-place na | \"$2\" \"$3\" --ranks 2; echo rc=$?"
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE} ${_fmt})
    set_tests_properties(perf_nccl_format_rejects_na PROPERTIES TIMEOUT 120
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "nccl_tests_format: FAIL: time is not a number \\('N/A'\\)[^\n]*\nrc=1\n")
    # ... and rmacoll's own --json document (what -J wrote before issue 34)
    # is not nccl-tests' JSON: given to the checker as the -J file, refused.
    add_test(NAME perf_nccl_format_rejects_old_json COMMAND sh -c
      "d=$(mktemp -d) || exit 3; \"$1\" -np 2 --ppn 1 -b 1K -e 1K -n 2 -w 1 --json \"$d/old.json\" >\"$d/out\"; { echo \"# Writing JSON output to $d/old.json\"; cat \"$d/out\"; } | \"$2\" \"$3\" --ranks 2 --json \"$d/old.json\"; echo rc=$?; rm -rf \"$d\""
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE} ${_fmt})
    set_tests_properties(perf_nccl_format_rejects_old_json PROPERTIES TIMEOUT 120
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "nccl_tests_format: FAIL: top has no 'version'\nrc=1\n")
    # -a: nccl-tests' default, the mean over ranks
    add_test(NAME perf_average_default_mean COMMAND sh -c
      "\"$1\" -np 2 --ppn 1 -b 1K -e 1K -n 2 -w 1 --json - | \"$2\" -c 'import json,sys; d=json.load(sys.stdin); assert d[\"average\"]==\"mean\", d[\"average\"]; print(\"average\", d[\"average\"])'"
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE})
    set_tests_properties(perf_average_default_mean PROPERTIES TIMEOUT 120
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "time mean over ranks.*average mean")
    # --json - : the JSON document alone on stdout; -d all: every type
    add_test(NAME perf_json_stdout COMMAND sh -c
      "\"$1\" -b 1K -e 2K -f 2 -n 2 -w 1 -d all --json - 2>/dev/null | \"$2\" -c 'import json,sys; d=json.load(sys.stdin); t=[r[\"type\"] for r in d[\"rows\"]]; assert d[\"status\"]==\"ok\" and len(t)==20 and t[0]==\"int8\" and t[-1]==\"bfloat16\" and all(r[\"wrong\"]==0 for r in d[\"rows\"]), t; print(\"json ok\", len(t))'"
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE})
    set_tests_properties(perf_json_stdout PROPERTIES TIMEOUT 300
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess" PASS_REGULAR_EXPRESSION "json ok 20")
    # -R 1 in the JSON: "local_register": 1, "host_alloc": "rmacoll_mem_alloc"
    add_test(NAME perf_json_local_register COMMAND sh -c
      "\"$1\" -b 1K -e 2K -f 2 -n 2 -w 1 -R 1 --json - 2>/dev/null | \"$2\" -c 'import json,sys; d=json.load(sys.stdin); assert d[\"status\"]==\"ok\" and d[\"memory\"]==\"host\" and d[\"local_register\"]==1 and d[\"host_alloc\"]==\"rmacoll_mem_alloc\" and len(d[\"rows\"])==2 and all(r[\"wrong\"]==0 for r in d[\"rows\"]), d; print(\"json local_register ok\")'"
      sh $<TARGET_FILE:rmacoll-perf> ${Python3_EXECUTABLE})
    set_tests_properties(perf_json_local_register PROPERTIES TIMEOUT 120
      ENVIRONMENT "${_perf_env}" LABELS "multiprocess" PASS_REGULAR_EXPRESSION "json local_register ok")
  endif()
  # rmacoll-info --runtime --json: one JSON object with every section and
  # every variable rmacoll reads, with its value here.
  if(Python3_Interpreter_FOUND AND TARGET rmacoll-info)
    add_test(NAME rmacoll_info_runtime_json COMMAND sh -c
      "\"$1\" --runtime --json | \"$2\" -c 'import json,sys; d=json.load(sys.stdin); e={v[\"name\"]: v for v in d[\"environment\"]}; assert set(d)=={\"versions\",\"libfabric_providers\",\"rdma_devices\",\"gpus\",\"environment\"}, d.keys(); assert e[\"RMACOLL_RELAY_SLOTS\"][\"value\"]==\"8\" and e[\"RMACOLL_RELAY_SLOTS\"][\"config_key\"]; assert \"RMACOLL_LOG_FILE\" in e and \"RMACOLL_NODE_ID\" in e and \"PMIX_RANK\" in e; assert d[\"versions\"][\"rmacoll\"]; print(\"runtime ok\", len(e))'"
      sh $<TARGET_FILE:rmacoll-info> ${Python3_EXECUTABLE})
    set_tests_properties(rmacoll_info_runtime_json PROPERTIES TIMEOUT 60
      ENVIRONMENT "RMACOLL_RELAY_SLOTS=8" PASS_REGULAR_EXPRESSION "runtime ok")
  endif()
  # Levels are case-insensitive (NCCL_DEBUG=INFO style).
  if(TARGET rmacoll-info)
    add_test(NAME rmacoll_info_level_upper COMMAND rmacoll-info --json)
    set_tests_properties(rmacoll_info_level_upper PROPERTIES TIMEOUT 60
      ENVIRONMENT "RMACOLL_CONFIG=;RMACOLL_LOG_LEVEL=INFO;RMACOLL_LOG_SUBSYSTEMS=Bootstrap,CORE"
      PASS_REGULAR_EXPRESSION "\"key\": ?\"log.level\", ?\"type\": ?\"[^\"]*\", ?\"default\": ?\"warn\", ?\"value\": ?\"info\"")
  endif()
  # Usage errors exit 64 before any rank starts (no "rank(s) failed").
  foreach(_bad "inter;--inter;bogus" "scheduler;--scheduler;nope"
                "np;-np;4" "nodes;--nodes;0,1,x" "graph;-G;1" "threads;-t;2"
                "register;-R;3")
    list(GET _bad 0 _n)
    list(GET _bad 1 _o)
    list(GET _bad 2 _v)
    add_test(NAME perf_usage_exit64_${_n} COMMAND sh -c
      "\"$1\" --dist matrix:\"$2\" \"$3\" \"$4\" 2>&1; rc=$?; echo rc=$rc; test $rc -eq 64"
      sh $<TARGET_FILE:rmacoll-perf> ${PROJECT_SOURCE_DIR}/tests/cases/moe_zipf_2x4.txt ${_o} ${_v})
    set_tests_properties(perf_usage_exit64_${_n} PROPERTIES TIMEOUT 30
      ENVIRONMENT "${_perf_env}" FAIL_REGULAR_EXPRESSION "rank\\(s\\) failed|launch: rank")
  endforeach()
  # nccl-tests flags refused (exit 64 before any rank starts), each with a
  # message naming the flag (short and long form) and why.
  foreach(_bad "y;-y;1;-y 1 \\(--stream_null\\): rmacoll-perf never runs the collective on the CUDA default stream"
                "y_long;--stream_null;1;-y 1 \\(--stream_null\\): "
                "x;-x;0;-x 0 \\(--cta_policy\\): NCCL's CTA policy applies to NCCL kernels"
                "x_long;--cta_policy;2;-x 2 \\(--cta_policy\\): "
                "D;-D;1;-D 1 \\(--device_implementation\\): nccl-tests' NCCL device-API kernels"
                "u;-u;4;-u 4 \\(--unalign\\): misaligned buffers are not supported"
                "u_long;--unalign;1;-u 1 \\(--unalign\\): "
                "t;-t;2;-t 2: rmacoll-perf runs one rank per process"
                "g;--ngpus;8;-g 8: rmacoll-perf runs one rank per process"
                "V;-V;0;bad value for -V: 0")
    list(GET _bad 0 _n)
    list(GET _bad 1 _o)
    list(GET _bad 2 _v)
    list(GET _bad 3 _msg)
    add_test(NAME perf_nccl_flag_refused_${_n} COMMAND sh -c
      "\"$1\" -np 2 --ppn 1 -b 1K -e 1K \"$2\" \"$3\" 2>&1; echo rc=$?"
      sh $<TARGET_FILE:rmacoll-perf> ${_o} ${_v})
    set_tests_properties(perf_nccl_flag_refused_${_n} PROPERTIES TIMEOUT 30
      ENVIRONMENT "${_perf_env}"
      PASS_REGULAR_EXPRESSION "^rmacoll-perf: ${_msg}[^\n]*\nrc=64\n$")
  endforeach()
  # The launcher's summary gives each rank's own code: every rank fails the
  # mismatch case with RMACOLL_ERR_MISMATCH (it said RMACOLL_ERR_PEER, the
  # launcher's own status, for all of them).
  add_test(NAME perf_summary_rank_codes COMMAND sh -c
    "\"$1\" --dist matrix:\"$2\" -n 1 -w 0 2>&1; echo rc=$?"
    sh $<TARGET_FILE:rmacoll-perf> ${PROJECT_SOURCE_DIR}/tests/cases/mismatch_2x2.txt)
  set_tests_properties(perf_summary_rank_codes PROPERTIES TIMEOUT 120
    ENVIRONMENT "${_perf_env}" LABELS "multiprocess"
    PASS_REGULAR_EXPRESSION "\nrmacoll-perf: 4 of 4 rank\\(s\\) failed, 0 stopped by the launcher; each rank's own code: ranks 0-3 RMACOLL_ERR_MISMATCH \\(the ranks' messages above name the first failure\\)\nrc=1\n"
    FAIL_REGULAR_EXPRESSION "ERR_PEER")
  # Dataflow execution under random delays (docs/protocol.md): every hand-over
  # to a transport sleeps 0..300 us at random, so lanes and ranks interleave
  # differently on every run; 3 nodes of 2, relay on, no eager path or
  # direct streams, 256-byte slots (one or two slots per channel: credits
  # on every chunk); data checked on every rank
  foreach(_slots 1 2)
    add_test(NAME perf_dataflow_delays_${_slots}slot COMMAND rmacoll-perf -np 6 --ppn 2
      --dist zipf:1.2 -b 4K -e 64K -f 4 -n 3 -w 1 -c 1)
    set_tests_properties(perf_dataflow_delays_${_slots}slot PROPERTIES TIMEOUT 300
      ENVIRONMENT "${_perf_env};RMACOLL_TEST_DELAY_US=300;RMACOLL_RELAY_SLOTS=${_slots};RMACOLL_RELAY_BUFFER_BYTES=${_slots}K;RMACOLL_EAGER_MAX_BYTES=0;RMACOLL_NODE_EAGER_MAX_BYTES=0;RMACOLL_RELAY_DIRECT_MIN_BYTES=0"
      LABELS "multiprocess"
      PASS_REGULAR_EXPRESSION "Out of bounds values : 0 OK"
      FAIL_REGULAR_EXPRESSION "FAILED|failed")
  endforeach()
  # --nodes: a non-contiguous node map from the command line
  add_test(NAME perf_nodes_map COMMAND rmacoll-perf --nodes 0,1,0,1 -b 1K -e 4K -n 3 -w 1)
  set_tests_properties(perf_nodes_map PROPERTIES TIMEOUT 300 ENVIRONMENT "${_perf_env}"
    LABELS "multiprocess"
    PASS_REGULAR_EXPRESSION "nodes 2 \\(2,2\\) non-contiguous, launch spawned.*Out of bounds values : 0 OK")
  # mpirun with no rmacoll variables (PMIx carries the rendezvous id), and
  # with two virtual nodes (--ppn 2 under the launcher). Skipped without
  # mpiexec; Open MPI as root needs the OMPI_* variables.
  find_program(RMACOLL_MPIEXEC NAMES mpiexec mpirun)
  set(_mpi_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;${_perf_env}")
  if(RMACOLL_MPIEXEC AND RMACOLL_HAVE_PMIX)
    add_test(NAME perf_mpirun_np4 COMMAND ${RMACOLL_MPIEXEC} -np 4 $<TARGET_FILE:rmacoll-perf> -b 1K -e 64K -n 5 -w 1)
    set_tests_properties(perf_mpirun_np4 PROPERTIES TIMEOUT 300 ENVIRONMENT "${_mpi_env}"
      LABELS "mpi;multiprocess"
      PASS_REGULAR_EXPRESSION "nranks 4, nodes 1 \\(4\\), launch mpirun.*Out of bounds values : 0 OK")
    add_test(NAME perf_mpirun_two_nodes COMMAND ${RMACOLL_MPIEXEC} -np 4 $<TARGET_FILE:rmacoll-perf> --ppn 2 -b 1K -e 64K -n 5 -w 1)
    set_tests_properties(perf_mpirun_two_nodes PROPERTIES TIMEOUT 300 ENVIRONMENT "${_mpi_env}"
      LABELS "mpi;multiprocess"
      PASS_REGULAR_EXPRESSION "nranks 4, nodes 2 \\(2,2\\), launch mpirun.*Out of bounds values : 0 OK")
    # a bad RMACOLL_* value on rank 2 only: every rank fails at once in
    # create, naming rank 2 and the key (rank 2 alone exited silently, and
    # the others waited)
    add_test(NAME perf_mpirun_bad_env_one_rank COMMAND ${RMACOLL_MPIEXEC} -np 4 sh -c
      "[ \"$OMPI_COMM_WORLD_RANK\" = 2 ] && export RMACOLL_EAGER_MAX_BYTES=lots; exec \"$0\" -b 1K -e 1K -n 1 -w 0"
      $<TARGET_FILE:rmacoll-perf>)
    set_tests_properties(perf_mpirun_bad_env_one_rank PROPERTIES TIMEOUT 60
      ENVIRONMENT "${_mpi_env}" LABELS "mpi;multiprocess"
      PASS_REGULAR_EXPRESSION "rank [013]: the configuration of rank 2 is invalid: environment RMACOLL_EAGER_MAX_BYTES='lots'"
      FAIL_REGULAR_EXPRESSION "Out of bounds")
  endif()
  # The MPI baseline with -R 1: buffers from MPI_Alloc_mem, checked clean;
  # with a flipped byte the check fails in both rows (mpirun exits 2).
  if(TARGET rmacoll-mpi-perf)
    # A usage error exits 64 (before MPI_Init), as --help says.
    add_test(NAME perf_mpi_usage_exit64 COMMAND sh -c
      "\"$1\" -R 1 --buffers cuda 2>&1; echo \"exit $?\"" sh $<TARGET_FILE:rmacoll-mpi-perf>)
    set_tests_properties(perf_mpi_usage_exit64 PROPERTIES TIMEOUT 30
      PASS_REGULAR_EXPRESSION "^rmacoll-mpi-perf: -R 1: registered buffers are host memory; --buffers cuda allocates its own device buffers: use -R 0 with it\nexit 64\n$")
  endif()
  if(RMACOLL_MPIEXEC AND TARGET rmacoll-mpi-perf)
    # Sanitizer builds: LeakSanitizer reports what Open MPI keeps at exit
    # (ompi_op_base_op_select, hwloc, opal_argv, unloaded MCA components),
    # which changes the exit status; leaks are not checked in these two.
    set(_mpi_tool_env "${_mpi_env}")
    if(RMACOLL_SANITIZE)
      list(APPEND _mpi_tool_env "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
    endif()
    add_test(NAME perf_mpi_local_register COMMAND ${RMACOLL_MPIEXEC} -np 4
      $<TARGET_FILE:rmacoll-mpi-perf> -b 1K -e 64K -f 8 -n 5 -w 1 -R 1)
    set_tests_properties(perf_mpi_local_register PROPERTIES TIMEOUT 120
      ENVIRONMENT "${_mpi_tool_env}" LABELS "mpi;multiprocess"
      PASS_REGULAR_EXPRESSION "nranks 4, nodes 1 \\(4\\), launch mpirun.*# memory host, local_register 1 \\(MPI_Alloc_mem\\), timing host clock.*\n +65536 +16384 +float .*Out of bounds values : 0 OK")
    add_test(NAME perf_mpi_local_register_check_fails COMMAND sh -c
      "RMACOLL_PERF_TEST_CORRUPT=1 \"$1\" -np 4 \"$2\" -b 1K -e 8K -f 8 -n 3 -w 1 -R 1 2>&1; echo \"exit $?\""
      sh ${RMACOLL_MPIEXEC} $<TARGET_FILE:rmacoll-mpi-perf>)
    set_tests_properties(perf_mpi_local_register_check_fails PROPERTIES TIMEOUT 120
      ENVIRONMENT "${_mpi_tool_env}" LABELS "mpi;multiprocess"
      PASS_REGULAR_EXPRESSION "local_register 1 \\(MPI_Alloc_mem\\).*Out of bounds values : 2 FAILED.*exit 2")
  endif()
endif()
