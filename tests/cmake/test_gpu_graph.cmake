# tests/cmake/test_gpu_graph.cmake - calls captured into CUDA graphs and replayed, ranks as
# threads of one process (shared CUDA context, no IPC between them). Needs
# the CUDA runtime and a GPU at run time (exit 77 = skipped without one).
if(RMACOLL_HAVE_CUDA AND TARGET CUDA::cudart)
  target_link_libraries(test_gpu_graph PRIVATE CUDA::cudart Threads::Threads)
  add_test(NAME test_gpu_graph COMMAND test_gpu_graph)
  set_tests_properties(test_gpu_graph PROPERTIES TIMEOUT 900 LABELS "gpu"
    SKIP_RETURN_CODE 77)
else()
  set_target_properties(test_gpu_graph PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
