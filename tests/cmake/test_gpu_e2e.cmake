# tests/cmake/test_gpu_e2e.cmake - device-memory end-to-end test: needs the
# CUDA runtime (CUDA::cudart, never libcuda) and a GPU at run time (exit 77
# = skipped without one). Label "gpu": `ctest -L gpu` on a GPU machine,
# `ctest -LE gpu` elsewhere. The NCCL case is compiled when the library
# was built with its NCCL bootstrap (cmake/nccl.cmake: RMACOLL_HAVE_NCCL).
if(RMACOLL_HAVE_CUDA AND TARGET CUDA::cudart)
  target_link_libraries(test_gpu_e2e PRIVATE CUDA::cudart)
  if(TARGET rmacoll_emunic) # test_cross_node_emunic
    target_compile_definitions(test_gpu_e2e PRIVATE
      RMACOLL_TEST_EMUNIC_PLUGIN="$<TARGET_FILE:rmacoll_emunic>")
    add_dependencies(test_gpu_e2e rmacoll_emunic)
  endif()
  if(RMACOLL_HAVE_NCCL AND NCCL_LIB AND NCCL_INCLUDE_DIR)
    target_compile_definitions(test_gpu_e2e PRIVATE RMACOLL_TEST_HAVE_NCCL=1)
    target_include_directories(test_gpu_e2e PRIVATE ${NCCL_INCLUDE_DIR})
    target_link_libraries(test_gpu_e2e PRIVATE ${NCCL_LIB})
  endif()
  add_test(NAME test_gpu_e2e COMMAND test_gpu_e2e)
  set_tests_properties(test_gpu_e2e PROPERTIES TIMEOUT 1800 LABELS "gpu;multiprocess"
    SKIP_RETURN_CODE 77 ENVIRONMENT "NCCL_NVLS_ENABLE=0")
else()
  set_target_properties(test_gpu_e2e PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
